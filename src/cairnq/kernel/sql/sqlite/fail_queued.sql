-- Fails a queued task for good with error, without running it.
-- Returns the updated row, or zero rows when the task is no longer queued.
-- params: id, error, now_ms
update cairnq_tasks
set status = 'failed', error = :error, completed_at_ms = :now_ms, updated_at_ms = :now_ms
where id = :id and status = 'queued'
returning *;
