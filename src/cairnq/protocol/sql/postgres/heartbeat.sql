-- Extends an owned lease to now + lease_ms.
-- Returns the updated row (carrying the cancel flag), or zero rows when the lease is lost.
-- params: id, attempt, worker_id, now_ms, lease_ms
with clock as materialized (
    select coalesce(:now_ms::bigint, floor(extract(epoch from clock_timestamp()) * 1000)::bigint) as now_ms
)
update cairnq_tasks
set lease_until_ms = (select now_ms from clock) + :lease_ms::bigint,
    updated_at_ms = (select now_ms from clock)
where id = :id::text and status = 'running' and worker_id = :worker_id::text
  and attempt = :attempt::integer and lease_until_ms > (select now_ms from clock)
returning *;
