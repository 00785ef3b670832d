-- Parks just-inserted queued tasks: due at parked_run_at_ms (far in the future), so no worker claims them until released.
-- Returns the parked rows.
-- params: ids, parked_run_at_ms, now_ms
with clock as materialized (
    select coalesce(:now_ms::bigint, floor(extract(epoch from clock_timestamp()) * 1000)::bigint) as now_ms
)
update cairnq_tasks
set run_at_ms = :parked_run_at_ms::bigint, updated_at_ms = (select now_ms from clock)
where id = any(:ids::text[]) and status = 'queued'
returning *;
