-- Records progress and message on an owned attempt. A null argument keeps the stored value.
-- Returns the updated row, or zero rows when the caller no longer owns the attempt (lost lease).
-- params: id, attempt, worker_id, now_ms, progress, message
with clock as materialized (
    select coalesce(:now_ms::bigint, floor(extract(epoch from clock_timestamp()) * 1000)::bigint) as now_ms
)
update cairnq_tasks
set progress = coalesce(:progress::double precision, progress),
    message = coalesce(:message::text, message),
    updated_at_ms = (select now_ms from clock)
where id = :id::text and status = 'running' and worker_id = :worker_id::text
  and attempt = :attempt::integer and lease_until_ms > (select now_ms from clock)
returning *;
