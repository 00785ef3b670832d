-- Settles an attempt this transaction holds (hold ran first, so the row is locked): as complete, but the lease may have run out meanwhile.
-- Returns the updated row, or zero rows when the caller no longer owns the attempt (lost lease).
-- params: id, attempt, worker_id, now_ms, result
with clock as materialized (
    select coalesce(:now_ms::bigint, floor(extract(epoch from clock_timestamp()) * 1000)::bigint) as now_ms
)
update cairnq_tasks
set status = case when cancel_requested_at_ms is null then 'succeeded' else 'canceled' end,
    result = case when cancel_requested_at_ms is null then :result::jsonb else result end,
    progress = case when cancel_requested_at_ms is null then 1.0 else progress end,
    lease_until_ms = null,
    completed_at_ms = (select now_ms from clock),
    updated_at_ms = (select now_ms from clock)
where id = :id::text and status = 'running' and worker_id = :worker_id::text
  and attempt = :attempt::integer
returning *;
