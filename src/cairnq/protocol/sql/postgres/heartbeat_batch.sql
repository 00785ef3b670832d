-- Extends many owned leases to now + lease_ms, where ids[i] is held at attempts[i] with lease_tokens[i]. Skips rows locked elsewhere.
-- Returns (id, cancel_requested_at_ms) per renewed row. An id left out was not renewed.
-- params: ids, attempts, lease_tokens, worker_id, now_ms, lease_ms
with clock as materialized (
    select coalesce(:now_ms::bigint, floor(extract(epoch from clock_timestamp()) * 1000)::bigint) as now_ms
),
held as materialized (
    select t.id, p.token
    from unnest(:ids::text[], :attempts::integer[], :lease_tokens::bigint[]) as p (id, attempt, token)
    -- Each row by its primary key (offset 0 keeps the planner from flattening the lookup):
    -- the status index holds an entry for every settled row not yet vacuumed, and a plan
    -- that scans it for 'running' walks them all, once per batch.
    cross join lateral (
        select * from cairnq_tasks as t where t.id = p.id offset 0
    ) as t
    where t.attempt = p.attempt
      and t.status = 'running'
      and t.worker_id = :worker_id::text
      and t.lease_until_ms > (select now_ms from clock)
    for update of t skip locked
),
fenced as materialized (
    select h.id
    from held as h
    join cairnq_leases as l on l.task_id = h.id
    where l.token = h.token
    for share of l
)
update cairnq_tasks
set lease_until_ms = (select now_ms from clock) + :lease_ms::bigint,
    updated_at_ms = (select now_ms from clock)
where id in (select id from fenced)
returning id, cancel_requested_at_ms;
