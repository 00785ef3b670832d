-- The run time histograms of the hourly rollups (extension table cairnq_attempt_rollups, x0028) of the hours in [since_ms, until_ms), summed per task name or queue (by: 'name' or 'queue') and bucket (the run time rounded down to two significant figures), for the trends' percentiles.
-- Returns (key, run_ms, attempts) per key and bucket.
-- params: since_ms, until_ms, by
select case when :by = 'queue' then r.queue else r.name end as key,
       cast(h.key as integer) as run_ms,
       sum(h.value) as attempts
from cairnq_attempt_rollups as r, json_each(r.histogram) as h
where r.hour_ms >= :since_ms and r.hour_ms < :until_ms
group by 1, 2;
