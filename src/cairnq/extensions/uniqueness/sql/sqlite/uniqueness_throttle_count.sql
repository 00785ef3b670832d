-- Counts the tasks the throttle key holds in their period now.
-- Returns one row (held, first_until_ms: when the first of them leaves it, null when none; now_ms).
-- params: key, now_ms
select count(*) as held, min(until_ms) as first_until_ms, :now_ms as now_ms
from cairnq_uniqueness_throttle
where key = :key and until_ms > :now_ms;
