-- Extends an owned lease to now + lease_ms.
-- Returns the updated row (carrying the cancel flag), or zero rows when the lease is lost.
-- params: id, attempt, worker_id, now_ms, lease_ms
update cairnq_tasks
set lease_until_ms = :now_ms + :lease_ms,
    updated_at_ms = :now_ms
where id = :id and status = 'running' and worker_id = :worker_id
  and attempt = :attempt and lease_until_ms > :now_ms
returning *;
