-- Settles an owned attempt as succeeded with result, whether or not a cancel was requested.
-- Returns the updated row, or zero rows when the caller no longer owns the attempt (lost lease).
-- params: id, attempt, worker_id, now_ms, result, message
update cairnq_tasks
set status = 'succeeded',
    result = :result,
    progress = 1.0,
    message = coalesce(:message, message),
    lease_until_ms = null,
    completed_at_ms = :now_ms,
    updated_at_ms = :now_ms
where id = :id and status = 'running' and worker_id = :worker_id
  and attempt = :attempt and lease_until_ms > :now_ms
returning *;
