-- The hourly rollups (extension table cairnq_attempt_rollups, x0028) of the hours in [since_ms, until_ms), per hour and task name or queue (by: 'name' or 'queue'), for the trends to sum.
-- Returns (key, attempts, succeeded, failed, retry, canceled, snoozed, lost, released, histogram) per rollup row.
-- params: since_ms, until_ms, by
select case when :by::text = 'queue' then queue else name end as key,
       attempts, succeeded, failed, retry, canceled, snoozed, lost, released, histogram
from cairnq_attempt_rollups
where hour_ms >= :since_ms::bigint and hour_ms < :until_ms::bigint;
