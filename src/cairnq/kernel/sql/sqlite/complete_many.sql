-- Settles many owned attempts at once, as complete does each: succeeded with its result, or canceled (result kept) when a cancel was requested.
-- Returns (id, status, queue) per settled row; an id left out was not owned any more (lost lease).
-- params: ids, attempts, lease_tokens, results, worker_id, now_ms
update cairnq_tasks
set status = case when cancel_requested_at_ms is null then 'succeeded' else 'canceled' end,
    result = case when cancel_requested_at_ms is null then settled.new_result else result end,
    progress = case when cancel_requested_at_ms is null then 1.0 else progress end,
    lease_until_ms = null,
    completed_at_ms = :now_ms,
    updated_at_ms = :now_ms
from (
    select i.value as settled_id, a.value as settled_attempt, k.value as settled_token,
           r.value as new_result
    from json_each(:ids) as i
    join json_each(:attempts) as a on a.key = i.key
    join json_each(:lease_tokens) as k on k.key = i.key
    join json_each(:results) as r on r.key = i.key
) as settled
where cairnq_tasks.id = settled.settled_id
  and cairnq_tasks.attempt = settled.settled_attempt
  -- Unary + keeps the status index out: each row is found by its id, not by walking
  -- every running task once per batch.
  and +cairnq_tasks.status = 'running'
  and cairnq_tasks.worker_id = :worker_id
  and cairnq_tasks.lease_until_ms > :now_ms
  and exists (select 1 from cairnq_leases as l
              where l.task_id = settled.settled_id and l.token = settled.settled_token)
returning id, status, queue;
