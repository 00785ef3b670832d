-- Gives a queued task that never started (attempt 0) a new payload and metadata, due
-- delay_ms after now. Returns the updated row, or zero rows when it is no longer such a task.
-- params: id, payload, metadata, delay_ms, now_ms
with clock as materialized (
    select coalesce(:now_ms::bigint, floor(extract(epoch from clock_timestamp()) * 1000)::bigint) as now_ms
)
update cairnq_tasks
set payload = :payload::jsonb, metadata = :metadata::jsonb,
    run_at_ms = (select now_ms from clock) + :delay_ms::bigint,
    updated_at_ms = (select now_ms from clock)
where id = :id::text and status = 'queued' and attempt = 0
returning *;
