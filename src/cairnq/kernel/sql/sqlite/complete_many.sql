-- Settles many owned attempts at once, as complete does each: succeeded with its result, or canceled (result kept) when a cancel was requested; ids[i] is held at attempts[i] by worker_ids[i] (the claim's worker_id value).
-- Returns (id, status, queue) per settled row; an id left out was not owned any more (lost lease).
-- params: ids, attempts, worker_ids, results, now_ms
update cairnq_tasks
set status = case when cancel_requested_at_ms is null then 'succeeded' else 'canceled' end,
    result = case when cancel_requested_at_ms is null then p.new_result else result end,
    progress = case when cancel_requested_at_ms is null then 1.0 else progress end,
    lease_until_ms = null,
    completed_at_ms = :now_ms,
    updated_at_ms = :now_ms
from (
    select i.value as id, a.value as attempt, w.value as worker_id, r.value as new_result
    from json_each(:ids) as i
    join json_each(:attempts) as a on a.key = i.key
    join json_each(:worker_ids) as w on w.key = i.key
    join json_each(:results) as r on r.key = i.key
) as p
where cairnq_tasks.id = p.id
  -- Unary + keeps the status index out: each row is found by its id, not by walking
  -- every running task once per batch.
  and +cairnq_tasks.status = 'running' and cairnq_tasks.worker_id = p.worker_id
  and cairnq_tasks.attempt = p.attempt and cairnq_tasks.lease_until_ms > :now_ms
returning id, status, queue;
