-- Trends of the attempts that ended in [since_ms, until_ms) (extension table cairnq_task_attempts, x0009), per task name or queue (by: 'name' or 'queue'): attempts ended, succeeded, failed (failed, retry or lost), canceled, and the run time's p50 and p95 (nearest rank, over the succeeded, failed and retried attempts whose start is known).
-- Returns (key, attempts, succeeded, failed, canceled, p50_ms, p95_ms) per key, the busiest first; a task purged takes its attempts with it.
-- params: since_ms, until_ms, by
with ended as (
    select case when :by::text = 'queue' then t.queue else t.name end as key,
           a.outcome, a.ended_at_ms - a.started_at_ms as run_ms
    from cairnq_task_attempts as a
    join cairnq_tasks as t on t.id = a.task_id
    where a.ended_at_ms >= :since_ms::bigint and a.ended_at_ms < :until_ms::bigint
),
ranked as (
    select key, run_ms,
           row_number() over (partition by key order by run_ms) as rn,
           count(*) over (partition by key) as n
    from ended
    where run_ms is not null and outcome in ('succeeded', 'failed', 'retry')
),
runs as (
    select key,
           max(case when rn = (n * 50 + 99) / 100 then run_ms end) as p50_ms,
           max(case when rn = (n * 95 + 99) / 100 then run_ms end) as p95_ms
    from ranked
    group by key
)
select e.key as key, count(*) as attempts,
       sum(case when e.outcome = 'succeeded' then 1 else 0 end) as succeeded,
       sum(case when e.outcome in ('failed', 'retry', 'lost') then 1 else 0 end) as failed,
       sum(case when e.outcome = 'canceled' then 1 else 0 end) as canceled,
       r.p50_ms as p50_ms, r.p95_ms as p95_ms
from ended as e
left join runs as r on r.key = e.key
group by e.key, r.p50_ms, r.p95_ms
order by count(*) desc, e.key;
