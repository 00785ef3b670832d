-- The run time histograms of the hourly rollups (extension table cairnq_attempt_rollups, x0028) of the hours in [since_ms, until_ms), per task name or queue (by: 'name' or 'queue'), for the trends' percentiles; each a JSON array of counts by bucket, summed by the caller.
-- Returns (key, histogram) per rollup row.
-- params: since_ms, until_ms, by
select case when :by = 'queue' then queue else name end as key, histogram
from cairnq_attempt_rollups
where hour_ms >= :since_ms and hour_ms < :until_ms;
