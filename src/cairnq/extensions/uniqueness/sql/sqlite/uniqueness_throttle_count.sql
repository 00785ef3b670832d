-- How many tasks the throttle key holds in their period at now_ms, and when the first
-- of them leaves it (null when none).
-- params: key, now_ms
select count(*) as held, min(until_ms) as first_until_ms, :now_ms as now_ms
from cairnq_uniqueness_throttle
where key = :key and until_ms > :now_ms;
