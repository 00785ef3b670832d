-- Reads the key's unique_for period still running now (its task and when it ends).
-- Returns (task_id, started_ms, until_ms), or zero rows when none runs.
-- params: key, now_ms
select task_id, started_ms, until_ms
from cairnq_uniqueness_periods
where key = :key and until_ms > :now_ms;
