-- Settles an owned attempt: succeeded with result, or canceled (result kept) when a cancel was requested.
-- Returns the updated row, or zero rows when the caller no longer owns the attempt (lost lease).
-- params: id, attempt, worker_id, now_ms, result
update cairnq_tasks
set status = case when cancel_requested_at_ms is null then 'succeeded' else 'canceled' end,
    result = case when cancel_requested_at_ms is null then :result else result end,
    progress = case when cancel_requested_at_ms is null then 1.0 else progress end,
    lease_until_ms = null,
    completed_at_ms = :now_ms,
    updated_at_ms = :now_ms
where id = :id and status = 'running' and worker_id = :worker_id
  and attempt = :attempt and lease_until_ms > :now_ms
returning *;
