-- Releases parked tasks: due their submitted delay after now.
-- Returns the released rows.
-- params: ids, parked_run_at_ms, now_ms
with clock as materialized (
    select coalesce(:now_ms::bigint, floor(extract(epoch from clock_timestamp()) * 1000)::bigint) as now_ms
)
update cairnq_tasks
set run_at_ms = (select now_ms from clock)
        + coalesce((select delay_ms from cairnq_parked where task_id = cairnq_tasks.id), 0),
    updated_at_ms = (select now_ms from clock)
where id = any(:ids::text[]) and status = 'queued' and run_at_ms = :parked_run_at_ms::bigint
returning *;
