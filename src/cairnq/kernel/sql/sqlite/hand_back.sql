-- Hands an owned attempt back unspent: queued again, due at run_at_ms when given, else delay_ms after now, with the claim's attempt undone; canceled if a cancel is pending.
-- Returns the updated row, or zero rows when the caller no longer owns the attempt (lost lease).
-- params: id, attempt, worker_id, now_ms, run_at_ms, delay_ms
update cairnq_tasks
set status = case when cancel_requested_at_ms is not null then 'canceled' else 'queued' end,
    attempt = case when cancel_requested_at_ms is not null then attempt else attempt - 1 end,
    worker_id = case when cancel_requested_at_ms is not null then worker_id else null end,
    progress = case when cancel_requested_at_ms is not null then progress else null end,
    message = case when cancel_requested_at_ms is not null then message else null end,
    run_at_ms = case when cancel_requested_at_ms is not null then run_at_ms
                     else coalesce(:run_at_ms, :now_ms + :delay_ms) end,
    completed_at_ms = case when cancel_requested_at_ms is not null then :now_ms else null end,
    lease_until_ms = null,
    updated_at_ms = :now_ms
where id = :id and status = 'running' and worker_id = :worker_id
  and attempt = :attempt and lease_until_ms > :now_ms
returning *;
