-- The attempts that ended in [since_ms, until_ms) per task name or queue (by: 'name' or 'queue') and time bucket of bucket_ms (extension table cairnq_task_attempts, x0009): succeeded and failed (failed, retry or lost) per bucket, for charts.
-- Returns (key, bucket, succeeded, failed) per key and bucket that had an attempt end; bucket 0 starts at origin_ms.
-- params: since_ms, until_ms, by, origin_ms, bucket_ms
select case when :by = 'queue' then t.queue else t.name end as key,
       (a.ended_at_ms - :origin_ms) / :bucket_ms as bucket,
       sum(case when a.outcome = 'succeeded' then 1 else 0 end) as succeeded,
       sum(case when a.outcome in ('failed', 'retry', 'lost') then 1 else 0 end) as failed
from cairnq_task_attempts as a
cross join cairnq_tasks as t on t.id = a.task_id
where a.ended_at_ms >= :since_ms and a.ended_at_ms < :until_ms
group by 1, 2
order by 1, 2;
