-- Defers queued tasks: due at run_at_ms (a time far enough ahead keeps them unclaimed until undefer).
-- Returns the updated rows.
-- params: ids, run_at_ms, now_ms
with clock as materialized (
    select coalesce(:now_ms::bigint, floor(extract(epoch from clock_timestamp()) * 1000)::bigint) as now_ms
)
update cairnq_tasks
set run_at_ms = :run_at_ms::bigint, updated_at_ms = (select now_ms from clock)
where id = any(:ids::text[]) and status = 'queued'
returning *;
