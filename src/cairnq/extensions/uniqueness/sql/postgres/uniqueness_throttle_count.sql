-- Counts the tasks the throttle key holds in their period now.
-- Returns one row (held, first_until_ms: when the first of them leaves it, null when none; now_ms).
-- params: key, now_ms
with clock as materialized (
    select coalesce(:now_ms::bigint, floor(extract(epoch from clock_timestamp()) * 1000)::bigint) as now_ms
)
select count(t.key) as held, min(t.until_ms) as first_until_ms, clock.now_ms as now_ms
from clock
left join cairnq_uniqueness_throttle t on t.key = :key::text and t.until_ms > clock.now_ms
group by clock.now_ms;
