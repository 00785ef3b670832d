-- The tasks a wait holds parked now, per queue (of queue alone when given): queued, not yet due, and due at the parked_run_at_ms of a wait of theirs still waiting.
-- Returns (queue, parked) rows, one per queue holding one.
-- params: queue, now_ms
select t.queue, count(distinct t.id) as parked
from cairnq_waits as w
join cairnq_tasks as t on t.id = w.task_id
where w.state = 'waiting' and t.status = 'queued'
  and t.run_at_ms = w.parked_run_at_ms and t.run_at_ms > :now_ms
  and (:queue is null or t.queue = :queue)
group by t.queue;
