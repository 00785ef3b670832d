-- The hourly rollups (extension table cairnq_attempt_rollups, x0028) of the hours in [since_ms, until_ms), summed per task name or queue (by: 'name' or 'queue'), for the trends.
-- Returns (key, succeeded, failed, retry, canceled, snoozed, lost, released) per key.
-- params: since_ms, until_ms, by
select case when :by = 'queue' then queue else name end as key,
       sum(succeeded) as succeeded, sum(failed) as failed, sum(retry) as retry,
       sum(canceled) as canceled, sum(snoozed) as snoozed, sum(lost) as lost,
       sum(released) as released
from cairnq_attempt_rollups
where hour_ms >= :since_ms and hour_ms < :until_ms
group by 1;
