-- Starts the key's unique_for period now, for the task just inserted, in place of the key's earlier one.
-- Returns (until_ms), when the period ends.
-- params: key, task_id, period_ms, now_ms
with clock as materialized (
    select coalesce(:now_ms::bigint, floor(extract(epoch from clock_timestamp()) * 1000)::bigint) as now_ms
)
insert into cairnq_uniqueness_periods (key, task_id, started_ms, until_ms)
select :key::text, :task_id::text, clock.now_ms, clock.now_ms + :period_ms::bigint
from clock
on conflict (key) do update
set task_id = excluded.task_id, started_ms = excluded.started_ms, until_ms = excluded.until_ms
returning until_ms;
