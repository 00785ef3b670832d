-- Counts the task just inserted against its throttle key, for per_ms from now.
-- Returns nothing.
-- params: key, task_id, per_ms, now_ms
with clock as materialized (
    select coalesce(:now_ms::bigint, floor(extract(epoch from clock_timestamp()) * 1000)::bigint) as now_ms
)
insert into cairnq_uniqueness_throttle (key, task_id, at_ms, until_ms)
select :key::text, :task_id::text, clock.now_ms, clock.now_ms + :per_ms::bigint
from clock;
