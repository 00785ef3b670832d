-- Reads the earliest next slot among the schedules not paused (ties by name).
-- Returns zero or one (name, next_ms) row.
-- params: none
select name, next_ms
from cairnq_schedules
where next_ms is not null and paused = 0
order by next_ms, name
limit 1
