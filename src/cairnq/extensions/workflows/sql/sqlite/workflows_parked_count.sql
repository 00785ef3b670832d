-- The tasks parked on their dependencies or gathered children now, per queue (of queue alone when given): queued and not yet due.
-- Returns (queue, parked) rows, one per queue holding one.
-- params: queue, now_ms
select t.queue, count(*) as parked
from cairnq_parked as p
join cairnq_tasks as t on t.id = p.task_id
where t.status = 'queued' and t.run_at_ms > :now_ms
  and (:queue is null or t.queue = :queue)
group by t.queue;
