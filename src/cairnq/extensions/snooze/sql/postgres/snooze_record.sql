-- Counts one more snooze of a task (extension table cairnq_task_snoozes, x0007), with when and for how long.
-- Returns one row (count, last_snoozed_at_ms, last_delay_ms): the counts after this snooze.
-- params: id, now_ms, delay_ms
with clock as materialized (
    select coalesce(:now_ms::bigint, floor(extract(epoch from clock_timestamp()) * 1000)::bigint) as now_ms
)
insert into cairnq_task_snoozes (task_id, count, last_snoozed_at_ms, last_delay_ms)
values (:id::text, 1, (select now_ms from clock), :delay_ms::bigint)
on conflict (task_id) do update
set count = cairnq_task_snoozes.count + 1,
    last_snoozed_at_ms = excluded.last_snoozed_at_ms,
    last_delay_ms = excluded.last_delay_ms
returning count, last_snoozed_at_ms, last_delay_ms;
