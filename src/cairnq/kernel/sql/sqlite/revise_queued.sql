-- Gives a queued task that never started (attempt 0) a new payload and metadata, due
-- delay_ms after now. Returns the updated row, or zero rows when it is no longer such a task.
-- params: id, payload, metadata, delay_ms, now_ms
update cairnq_tasks
set payload = :payload, metadata = :metadata, run_at_ms = :now_ms + :delay_ms,
    updated_at_ms = :now_ms
where id = :id and status = 'queued' and attempt = 0
returning *;
