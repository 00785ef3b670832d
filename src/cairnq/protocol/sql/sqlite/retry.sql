-- Re-queues a failed or canceled task to run now, keeping its result and optionally zeroing attempt.
-- Returns the updated row, or zero rows when there is no such task or it is not failed or canceled.
-- params: id, now_ms, reset_attempt
update cairnq_tasks
set status = 'queued',
    error = null,
    worker_id = null,
    lease_until_ms = null,
    cancel_requested_at_ms = null,
    completed_at_ms = null,
    progress = null,
    message = null,
    run_at_ms = :now_ms,
    attempt = case when :reset_attempt then 0 else attempt end,
    updated_at_ms = :now_ms
where id = :id and status in ('failed', 'canceled')
returning *;
