-- Records progress and message on an owned attempt. A null argument keeps the stored value.
-- Returns the updated row, or zero rows when the caller no longer owns the attempt (lost lease).
-- params: id, attempt, worker_id, now_ms, progress, message
update cairnq_tasks
set progress = coalesce(:progress, progress),
    message = coalesce(:message, message),
    updated_at_ms = :now_ms
where id = :id and status = 'running' and worker_id = :worker_id
  and attempt = :attempt and lease_until_ms > :now_ms
returning *;
