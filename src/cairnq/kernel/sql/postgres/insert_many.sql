-- Inserts many queued tasks in one statement; rows is a JSON array of [id, name, queue, payload text, metadata text, max_attempts, priority, delay_ms, parent_id, root_id, correlation_id].
-- Returns (id, run_at_ms, created_at_ms) per inserted task.
-- params: rows, now_ms
with clock as materialized (
    select coalesce(:now_ms::bigint, floor(extract(epoch from clock_timestamp()) * 1000)::bigint) as now_ms
)
insert into cairnq_tasks (
    id, name, queue, status, payload, metadata, attempt, max_attempts, priority,
    run_at_ms, parent_id, root_id, correlation_id, created_at_ms, updated_at_ms
)
select r ->> 0, r ->> 1, r ->> 2, 'queued', (r ->> 3)::jsonb, (r ->> 4)::jsonb, 0,
       (r ->> 5)::integer, (r ->> 6)::integer, clock.now_ms + (r ->> 7)::bigint,
       r ->> 8, r ->> 9, r ->> 10, clock.now_ms, clock.now_ms
from jsonb_array_elements(:rows::jsonb) as r, clock
returning id, run_at_ms, created_at_ms;
