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
    -- The i-th of each list by its path: a join on json_each's keys reads every list
    -- once per id (json_extract reuses its parse of a list within the statement).
    select i.value as id,
        json_extract(:attempts, '$[' || i.key || ']') as attempt,
        json_extract(:worker_ids, '$[' || i.key || ']') as worker_id,
        json_extract(:results, '$[' || i.key || ']') as new_result
    from json_each(:ids) as i
) as p
where cairnq_tasks.id = p.id
  -- Unary + keeps the status index out: each row is found by its id, not by walking
  -- every running task once per batch.
  and +cairnq_tasks.status = 'running' and cairnq_tasks.worker_id = p.worker_id
  and cairnq_tasks.attempt = p.attempt and cairnq_tasks.lease_until_ms > :now_ms
returning id, status, queue;
