-- Extends many owned leases to now + lease_ms, where ids[i] is held at attempts[i] by worker_ids[i] (the claim's worker_id value).
-- Returns (id, cancel_requested_at_ms) per renewed row. An id left out was not renewed.
-- params: ids, attempts, worker_ids, now_ms, lease_ms
update cairnq_tasks
set lease_until_ms = :now_ms + :lease_ms,
    updated_at_ms = :now_ms
from (
    -- The i-th of each list by its path: a join on json_each's keys reads every list
    -- once per id (json_extract reuses its parse of a list within the statement).
    select i.value as id,
        json_extract(:attempts, '$[' || i.key || ']') as attempt,
        json_extract(:worker_ids, '$[' || i.key || ']') as worker_id
    from json_each(:ids) as i
) as p
where cairnq_tasks.id = p.id
  -- Unary + keeps the status index out: each row is found by its id, not by walking
  -- every running task once per batch.
  and +cairnq_tasks.status = 'running' and cairnq_tasks.worker_id = p.worker_id
  and cairnq_tasks.attempt = p.attempt and cairnq_tasks.lease_until_ms > :now_ms
returning id, cancel_requested_at_ms;
