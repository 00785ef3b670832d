-- Settles many owned attempts at once, as complete does each: succeeded with its result, or canceled (result kept) when a cancel was requested; ids[i] is held at attempts[i] by worker_ids[i] (the claim's worker_id value).
-- Returns (id, status, queue) per settled row; an id left out was not owned any more (lost lease).
-- params: ids, attempts, worker_ids, results, now_ms
with clock as materialized (
    select coalesce(:now_ms::bigint, floor(extract(epoch from clock_timestamp()) * 1000)::bigint) as now_ms
),
owned as materialized (
    select t.id, p.new_result
    -- Each list behind a scalar subquery, so the planner cannot count its elements: a
    -- plan for the actual count looks cheaper than the prepared statement's generic one
    -- for small batches, and it would plan the statement anew at every run.
    from unnest((select :ids::text[]), (select :attempts::integer[]),
                (select :worker_ids::text[]), (select :results::text[]))
         as p (id, attempt, worker_id, new_result)
    -- Each row by its primary key (offset 0 keeps the planner from flattening the lookup):
    -- the status index holds an entry for every settled row not yet vacuumed, and a plan
    -- that scans it for 'running' walks them all, once per batch.
    cross join lateral (
        select * from cairnq_tasks as t where t.id = p.id offset 0
    ) as t
    where t.status = 'running' and t.worker_id = p.worker_id
      and t.attempt = p.attempt and t.lease_until_ms > (select now_ms from clock)
    order by t.id
    for update of t
)
update cairnq_tasks as t
set status = case when t.cancel_requested_at_ms is null then 'succeeded' else 'canceled' end,
    result = case when t.cancel_requested_at_ms is null then o.new_result::jsonb else t.result end,
    progress = case when t.cancel_requested_at_ms is null then 1.0 else t.progress end,
    lease_until_ms = null,
    completed_at_ms = clock.now_ms,
    updated_at_ms = clock.now_ms
from owned as o, clock
where t.id = o.id
returning t.id, t.status, t.queue;
