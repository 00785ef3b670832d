-- The run time histograms of the hourly rollups (extension table cairnq_attempt_rollups, x0028) of the hours in [since_ms, until_ms), summed per task name or queue (by: 'name' or 'queue') and bucket (the run time rounded down to two significant figures), for the trends' percentiles.
-- Returns (key, run_ms, attempts) per key and bucket.
-- params: since_ms, until_ms, by
select case when :by::text = 'queue' then r.queue else r.name end as key,
       h.key::bigint as run_ms,
       sum(h.value::bigint) as attempts
from cairnq_attempt_rollups as r, jsonb_each_text(r.histogram::jsonb) as h
where r.hour_ms >= :since_ms::bigint and r.hour_ms < :until_ms::bigint
group by 1, 2;
