-- The waits of key still waiting whose task is parked by them (queued, due at the wait's parked_run_at_ms), oldest first; of one task when id is given.
-- Returns (task_id, name, parked_run_at_ms) rows, at most limit.
-- params: key, id, limit
select w.task_id, w.name, w.parked_run_at_ms
from cairnq_waits as w
join cairnq_tasks as t on t.id = w.task_id
where w.event_key = :key and w.state = 'waiting' and w.kind = 'event'
  and (:id is null or w.task_id = :id)
  and t.status = 'queued' and t.run_at_ms = w.parked_run_at_ms
order by w.created_at_ms, w.task_id
limit :limit;
