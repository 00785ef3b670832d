-- Reads the key's unique_for period still running now (its task and when it ends).
-- Returns (task_id, started_ms, until_ms), or zero rows when none runs.
-- params: key, now_ms
select task_id, started_ms, until_ms
from cairnq_uniqueness_periods
where key = :key::text
  and until_ms > coalesce(:now_ms::bigint, floor(extract(epoch from clock_timestamp()) * 1000)::bigint);
