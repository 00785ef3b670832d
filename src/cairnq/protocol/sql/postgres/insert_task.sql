-- Inserts a queued task, due delay_ms after now.
-- Returns the inserted row.
-- params: id, name, queue, payload, metadata, max_attempts, priority, delay_ms, parent_id, root_id, correlation_id, now_ms
with clock as materialized (
    select coalesce(:now_ms::bigint, floor(extract(epoch from clock_timestamp()) * 1000)::bigint) as now_ms
)
insert into cairnq_tasks (
    id, name, queue, status, payload, metadata, attempt, max_attempts, priority,
    run_at_ms, parent_id, root_id, correlation_id, created_at_ms, updated_at_ms
)
select :id::text, :name::text, :queue::text, 'queued', :payload::jsonb, :metadata::jsonb,
       0, :max_attempts::integer, :priority::integer,
       clock.now_ms + :delay_ms::bigint, :parent_id::text, :root_id::text, :correlation_id::text,
       clock.now_ms, clock.now_ms
from clock
returning *;
