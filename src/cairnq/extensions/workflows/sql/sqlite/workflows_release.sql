-- Releases parked tasks: due their submitted delay after now.
-- Returns the released rows.
-- params: ids, parked_run_at_ms, now_ms
update cairnq_tasks
set run_at_ms = :now_ms + coalesce((select delay_ms from cairnq_parked where task_id = cairnq_tasks.id), 0),
    updated_at_ms = :now_ms
where id in (select value from json_each(:ids)) and status = 'queued'
  and run_at_ms = :parked_run_at_ms
returning *;
