-- The tasks a wait holds parked now, per queue (of queue alone when given): queued, not yet due, and due at the parked_run_at_ms of a wait of theirs still waiting.
-- Returns (queue, parked) rows, one per queue holding one.
-- params: queue, now_ms
with clock as materialized (
    select coalesce(:now_ms::bigint, floor(extract(epoch from clock_timestamp()) * 1000)::bigint) as now_ms
)
select t.queue, count(distinct t.id) as parked
from cairnq_waits as w
join cairnq_tasks as t on t.id = w.task_id
where w.state = 'waiting' and t.status = 'queued'
  and t.run_at_ms = w.parked_run_at_ms and t.run_at_ms > (select now_ms from clock)
  and (:queue::text is null or t.queue = :queue::text)
group by t.queue;
