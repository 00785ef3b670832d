-- Marks the task policies in use (cairnq_policies_use, x0017): from now + activation_ms on, unless a submit did before.
-- Returns one row: since_ms (when they are in use) and now_ms (this statement's clock).
-- params: now_ms, activation_ms
with clock as materialized (
    select coalesce(:now_ms::bigint, floor(extract(epoch from clock_timestamp()) * 1000)::bigint) as now_ms
)
insert into cairnq_policies_use (name, since_ms)
values ('policies', (select now_ms from clock) + :activation_ms::bigint)
on conflict (name) do update set name = excluded.name
returning since_ms, (select now_ms from clock) as now_ms;
