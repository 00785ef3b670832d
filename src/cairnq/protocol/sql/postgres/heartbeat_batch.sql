-- Extends many owned leases to now + lease_ms, where ids[i] is held at attempts[i] by worker_ids[i] (the claim's worker_id value). Skips rows locked elsewhere.
-- Returns (id, cancel_requested_at_ms) per renewed row. An id left out was not renewed.
-- params: ids, attempts, worker_ids, now_ms, lease_ms
with clock as materialized (
    select coalesce(:now_ms::bigint, floor(extract(epoch from clock_timestamp()) * 1000)::bigint) as now_ms
),
held as materialized (
    select t.id
    from unnest(:ids::text[], :attempts::integer[], :worker_ids::text[]) as p (id, attempt, worker_id)
    -- Each row by its primary key (offset 0 keeps the planner from flattening the lookup):
    -- the status index holds an entry for every settled row not yet vacuumed, and a plan
    -- that scans it for 'running' walks them all, once per batch.
    cross join lateral (
        select * from cairnq_tasks as t where t.id = p.id offset 0
    ) as t
    where t.status = 'running' and t.worker_id = p.worker_id
      and t.attempt = p.attempt and t.lease_until_ms > (select now_ms from clock)
    for update of t skip locked
)
update cairnq_tasks
set lease_until_ms = (select now_ms from clock) + :lease_ms::bigint,
    updated_at_ms = (select now_ms from clock)
where id in (select id from held)
returning id, cancel_requested_at_ms;
