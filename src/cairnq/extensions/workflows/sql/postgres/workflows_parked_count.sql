-- The tasks parked on their dependencies or gathered children now, per queue (of queue alone when given): queued and not yet due.
-- Returns (queue, parked) rows, one per queue holding one.
-- params: queue, now_ms
with clock as materialized (
    select coalesce(:now_ms::bigint, floor(extract(epoch from clock_timestamp()) * 1000)::bigint) as now_ms
)
select t.queue, count(*) as parked
from cairnq_parked as p
join cairnq_tasks as t on t.id = p.task_id
where t.status = 'queued' and t.run_at_ms > (select now_ms from clock)
  and (:queue::text is null or t.queue = :queue::text)
group by t.queue;
