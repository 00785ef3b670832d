-- Claims up to limit due queued tasks of one name in one queue, in claim order. Skips rows locked elsewhere.
-- Returns the claimed rows (running, owned by worker_id: a worker's id and claim nonce, or a store's bare id; in no set order), or zero rows when nothing is due.
-- params: queue, name, now_ms, worker_id, lease_ms, limit
with clock as materialized (
    select coalesce(:now_ms::bigint, floor(extract(epoch from clock_timestamp()) * 1000)::bigint) as now_ms
),
picked as materialized (
    select id
    from cairnq_tasks
    where queue = :queue::text
      and status = 'queued'
      and name = :name::text
      and run_at_ms <= (select now_ms from clock)
    order by priority desc, run_at_ms asc, id asc
    limit :limit::bigint
    for update skip locked
)
update cairnq_tasks
set status = 'running',
    worker_id = :worker_id::text,
    lease_until_ms = (select now_ms from clock) + :lease_ms::bigint,
    attempt = attempt + 1,
    updated_at_ms = (select now_ms from clock)
where id in (select id from picked)
  and status = 'queued'
returning *;
