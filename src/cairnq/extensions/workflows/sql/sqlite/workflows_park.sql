-- Parks just-inserted queued tasks: due at parked_run_at_ms (far in the future), so no worker claims them until released.
-- Returns the parked rows.
-- params: ids, parked_run_at_ms, now_ms
update cairnq_tasks
set run_at_ms = :parked_run_at_ms, updated_at_ms = :now_ms
where id in (select value from json_each(:ids)) and status = 'queued'
returning *;
