-- The attempt history's complete_many: settles many owned attempts as complete_many does (ids[i] held at attempts[i] by worker_ids[i], the claim's worker_id value) and records each settled attempt (extension table cairnq_task_attempts, x0009) in the same statement, under claims[i] (the claim's nonce) and worker (the worker id alone); started[i] is when it was claimed (null: not known).
-- Returns (id, status, queue) per settled row; an id left out was not owned any more (lost lease).
-- params: ids, attempts, worker_ids, results, claims, started, worker, now_ms
with clock as materialized (
    select coalesce(:now_ms::bigint, floor(extract(epoch from clock_timestamp()) * 1000)::bigint) as now_ms
),
owned as materialized (
    select t.id, p.new_result, p.claim, p.attempt, p.started_at_ms
    -- Each list behind a scalar subquery, as complete_many has them (so the prepared
    -- statement keeps one generic plan whatever the batch's size).
    from unnest((select :ids::text[]), (select :attempts::integer[]),
                (select :worker_ids::text[]), (select :results::text[]),
                (select :claims::bigint[]), (select :started::bigint[]))
         as p (id, attempt, worker_id, new_result, claim, started_at_ms)
    -- Each row by its primary key (offset 0 keeps the planner from flattening the lookup),
    -- as complete_many finds it.
    cross join lateral (
        select * from cairnq_tasks as t where t.id = p.id offset 0
    ) as t
    where t.status = 'running' and t.worker_id = p.worker_id
      and t.attempt = p.attempt and t.lease_until_ms > (select now_ms from clock)
    order by t.id
    for update of t
),
settled as (
    update cairnq_tasks as t
    set status = case when t.cancel_requested_at_ms is null then 'succeeded' else 'canceled' end,
        result = case when t.cancel_requested_at_ms is null then o.new_result::jsonb else t.result end,
        progress = case when t.cancel_requested_at_ms is null then 1.0 else t.progress end,
        lease_until_ms = null,
        completed_at_ms = clock.now_ms,
        updated_at_ms = clock.now_ms
    from owned as o, clock
    where t.id = o.id
    returning t.id, t.status, t.queue, o.claim, o.attempt, o.started_at_ms, clock.now_ms
),
recorded as (
    insert into cairnq_task_attempts (
        task_id, claim, attempt, worker_id, started_at_ms, ended_at_ms, outcome, error
    )
    select id, claim, attempt, :worker::text, started_at_ms, now_ms, status, null
    from settled
    on conflict (task_id, claim) do nothing
)
select id, status, queue from settled;
