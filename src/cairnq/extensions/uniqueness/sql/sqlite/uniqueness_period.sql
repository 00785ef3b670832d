-- The key's unique_for period still running at now_ms: its task and end; no row when none.
-- params: key, now_ms
select task_id, started_ms, until_ms
from cairnq_uniqueness_periods
where key = :key and until_ms > :now_ms;
