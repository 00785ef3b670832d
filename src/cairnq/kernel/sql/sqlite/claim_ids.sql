-- Claims the listed tasks that are still queued (a limited claim chose them).
-- Returns the claimed rows (running, owned by worker_id, in no set order).
-- params: ids, now_ms, worker_id, lease_ms
update cairnq_tasks
set status = 'running',
    worker_id = :worker_id,
    lease_until_ms = :now_ms + :lease_ms,
    attempt = attempt + 1,
    updated_at_ms = :now_ms
where id in (select value from json_each(:ids))
  -- The unary + keeps the planner on the primary key (not the status index's queued rows).
  and +status = 'queued'
returning *;
