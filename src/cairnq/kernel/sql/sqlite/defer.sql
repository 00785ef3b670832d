-- Defers queued tasks: due at run_at_ms (a time far enough ahead keeps them unclaimed until undefer).
-- Returns the updated rows.
-- params: ids, run_at_ms, now_ms
update cairnq_tasks
set run_at_ms = :run_at_ms, updated_at_ms = :now_ms
where id in (select value from json_each(:ids)) and status = 'queued'
returning *;
