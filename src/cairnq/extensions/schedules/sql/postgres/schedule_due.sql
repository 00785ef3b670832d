-- Names the schedules not paused whose next slot is due, earliest first.
-- Returns (name) rows.
-- params: now_ms, limit
select name
from cairnq_schedules
where next_ms <= :now_ms::bigint and not paused
order by next_ms
limit :limit::integer
