-- Points an idempotency key at a task, creating the key or moving it.
-- Returns nothing.
-- params: key, task_id, now_ms
with clock as materialized (
    select coalesce(:now_ms::bigint, floor(extract(epoch from clock_timestamp()) * 1000)::bigint) as now_ms
)
insert into cairnq_task_keys (key, task_id, created_at_ms, updated_at_ms)
select :key::text, :task_id::text, clock.now_ms, clock.now_ms
from clock
on conflict (key) do update
    set task_id = excluded.task_id, updated_at_ms = excluded.updated_at_ms;
