-- Settles an owned attempt as succeeded with result, whether or not a cancel was requested.
-- Returns the updated row, or zero rows when the caller no longer owns the attempt (lost lease).
-- params: id, attempt, worker_id, now_ms, result, message
with clock as materialized (
    select coalesce(:now_ms::bigint, floor(extract(epoch from clock_timestamp()) * 1000)::bigint) as now_ms
)
update cairnq_tasks
set status = 'succeeded',
    result = :result::jsonb,
    progress = 1.0,
    message = coalesce(:message::text, message),
    lease_until_ms = null,
    completed_at_ms = (select now_ms from clock),
    updated_at_ms = (select now_ms from clock)
where id = :id::text and status = 'running' and worker_id = :worker_id::text
  and attempt = :attempt::integer and lease_until_ms > (select now_ms from clock)
returning *;
