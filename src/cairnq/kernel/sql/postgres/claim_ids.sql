-- Claims the listed tasks that are still queued (a limited claim chose them, under their row locks).
-- Returns the claimed rows (running, owned by worker_id: a worker's id and claim nonce, or a store's bare id; in no set order).
-- params: ids, now_ms, worker_id, lease_ms
with clock as materialized (
    select coalesce(:now_ms::bigint, floor(extract(epoch from clock_timestamp()) * 1000)::bigint) as now_ms
)
update cairnq_tasks
set status = 'running',
    worker_id = :worker_id::text,
    lease_until_ms = (select now_ms from clock) + :lease_ms::bigint,
    attempt = attempt + 1,
    updated_at_ms = (select now_ms from clock)
where id = any(:ids::text[])
  and status = 'queued'
returning *;
