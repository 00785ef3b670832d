-- Fails a queued task for good with error, without running it.
-- Returns the updated row, or zero rows when the task is no longer queued.
-- params: id, error, now_ms
with clock as materialized (
    select coalesce(:now_ms::bigint, floor(extract(epoch from clock_timestamp()) * 1000)::bigint) as now_ms
)
update cairnq_tasks
set status = 'failed', error = :error::jsonb,
    completed_at_ms = (select now_ms from clock), updated_at_ms = (select now_ms from clock)
where id = :id::text and status = 'queued'
returning *;
