-- The attempts that ended in [since_ms, until_ms) (extension table cairnq_task_attempts, x0009), counted per hour of their end, task name, queue, outcome and run time rounded down to two significant figures (null for an attempt that did not run, or whose start is unknown), with the run times' exact sum; what the hourly rollups (x0028) are built from.
-- Returns (hour_ms, name, queue, outcome, run_ms, attempts, total_ms) per group; a task purged takes its attempts with it.
-- params: since_ms, until_ms
with ended as (
    select a.ended_at_ms - a.ended_at_ms % 3600000 as hour_ms, t.name as name, t.queue as queue,
           a.outcome as outcome,
           case when a.outcome in ('succeeded', 'failed', 'retry')
                then a.ended_at_ms - a.started_at_ms end as ms
    from cairnq_task_attempts as a
    join cairnq_tasks as t on t.id = a.task_id
    where a.ended_at_ms >= :since_ms::bigint and a.ended_at_ms < :until_ms::bigint
)
select hour_ms, name, queue, outcome,
       case
           when ms is null then null
           when ms < 100 then ms
           when ms < 1000 then ms / 10 * 10
           when ms < 10000 then ms / 100 * 100
           when ms < 100000 then ms / 1000 * 1000
           when ms < 1000000 then ms / 10000 * 10000
           when ms < 10000000 then ms / 100000 * 100000
           when ms < 100000000 then ms / 1000000 * 1000000
           else ms / 10000000 * 10000000
       end as run_ms,
       count(*) as attempts,
       sum(ms) as total_ms
from ended
group by 1, 2, 3, 4, 5;
