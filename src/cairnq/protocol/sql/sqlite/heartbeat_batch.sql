-- Extends many owned leases to now + lease_ms, where ids[i] is held at attempts[i] with lease_tokens[i].
-- Returns (id, cancel_requested_at_ms) per renewed row. An id left out was not renewed.
-- params: ids, attempts, lease_tokens, worker_id, now_ms, lease_ms
update cairnq_tasks
set lease_until_ms = :now_ms + :lease_ms,
    updated_at_ms = :now_ms
from (
    select i.value as held_id, a.value as held_attempt, k.value as held_token
    from json_each(:ids) as i
    join json_each(:attempts) as a on a.key = i.key
    join json_each(:lease_tokens) as k on k.key = i.key
) as held
where cairnq_tasks.id = held.held_id
  and cairnq_tasks.attempt = held.held_attempt
  -- Unary + keeps the status index out: each row is found by its id, not by walking
  -- every running task once per batch.
  and +cairnq_tasks.status = 'running'
  and cairnq_tasks.worker_id = :worker_id
  and cairnq_tasks.lease_until_ms > :now_ms
  and exists (select 1 from cairnq_leases as l
              where l.task_id = held.held_id and l.token = held.held_token)
returning id, cancel_requested_at_ms;
