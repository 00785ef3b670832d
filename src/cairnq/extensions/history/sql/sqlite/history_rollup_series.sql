-- The hourly rollups (extension table cairnq_attempt_rollups, x0028) of the hours in [since_ms, until_ms), per hour and task name or queue (by: 'name' or 'queue'): succeeded and failed (failed, retry or lost), for charts.
-- Returns (hour_ms, key, succeeded, failed) per hour and key rolled up.
-- params: since_ms, until_ms, by
select hour_ms,
       case when :by = 'queue' then queue else name end as key,
       sum(succeeded) as succeeded,
       sum(failed + retry + lost) as failed
from cairnq_attempt_rollups
where hour_ms >= :since_ms and hour_ms < :until_ms
group by 1, 2;
