-- Marks the task policies in use (cairnq_policies_use, x0020): from now + activation_ms on, unless a submit did before (then nothing changes: the row is never updated, so no submit waits on another's lock of it).
-- Returns one row when it wrote the marker: since_ms and now_ms (this statement's clock); none when it was there.
-- params: now_ms, activation_ms
with clock as materialized (
    select coalesce(:now_ms::bigint, floor(extract(epoch from clock_timestamp()) * 1000)::bigint) as now_ms
)
insert into cairnq_policies_use (name, since_ms)
values ('policies', (select now_ms from clock) + :activation_ms::bigint)
on conflict (name) do nothing
returning since_ms, (select now_ms from clock) as now_ms;
