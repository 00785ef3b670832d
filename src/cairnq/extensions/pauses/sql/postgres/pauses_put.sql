-- Pauses a queue or a task name (extension table cairnq_pauses, x0007) unless it is paused already.
-- Returns the new row (scope, target, paused_at_ms, paused_by); zero rows when it was paused already.
-- params: scope, target, now_ms, paused_by
with clock as materialized (
    select coalesce(:now_ms::bigint, floor(extract(epoch from clock_timestamp()) * 1000)::bigint) as now_ms
)
insert into cairnq_pauses (scope, target, paused_at_ms, paused_by)
values (:scope::text, :target::text, (select now_ms from clock), :paused_by::text)
on conflict (scope, target) do nothing
returning scope, target, paused_at_ms, paused_by;
