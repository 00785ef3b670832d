-- Points many keys at their tasks; rows is a JSON array of [key, task_id].
-- Returns nothing.
-- params: rows, now_ms
with clock as materialized (
    select coalesce(:now_ms::bigint, floor(extract(epoch from clock_timestamp()) * 1000)::bigint) as now_ms
)
insert into cairnq_task_keys (key, task_id, created_at_ms, updated_at_ms)
select r ->> 0, r ->> 1, clock.now_ms, clock.now_ms
from jsonb_array_elements(:rows::jsonb) as r, clock
on conflict (key) do update set task_id = excluded.task_id, updated_at_ms = excluded.updated_at_ms;
