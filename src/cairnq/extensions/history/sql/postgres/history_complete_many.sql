-- The attempt history's complete_many: settles many owned attempts as complete_many does and records each settled attempt (extension table cairnq_task_attempts, x0009) in the same statement; started is when each was claimed (null: not known).
-- Returns (id, status, queue) per settled row; an id left out was not owned any more (lost lease).
-- params: ids, attempts, lease_tokens, results, started, worker_id, now_ms
with clock as materialized (
    select coalesce(:now_ms::bigint, floor(extract(epoch from clock_timestamp()) * 1000)::bigint) as now_ms
),
owned as materialized (
    select t.id, s.token, s.new_result, s.attempt, s.started_at_ms
    from unnest(:ids::text[], :attempts::integer[], :lease_tokens::bigint[], :results::text[],
                :started::bigint[])
         as s (id, attempt, token, new_result, started_at_ms)
    -- Each row by its primary key (offset 0 keeps the planner from flattening the lookup),
    -- as complete_many finds it.
    cross join lateral (
        select * from cairnq_tasks as t where t.id = s.id offset 0
    ) as t
    where t.attempt = s.attempt
      and t.status = 'running'
      and t.worker_id = :worker_id::text
      and t.lease_until_ms > (select now_ms from clock)
    order by t.id
    for update of t
),
fenced as materialized (
    select o.id, o.new_result, o.token, o.attempt, o.started_at_ms
    from owned as o
    join cairnq_leases as l on l.task_id = o.id
    where l.token = o.token
    order by o.id
    for share of l
),
settled as (
    update cairnq_tasks as t
    set status = case when t.cancel_requested_at_ms is null then 'succeeded' else 'canceled' end,
        result = case when t.cancel_requested_at_ms is null then f.new_result::jsonb else t.result end,
        progress = case when t.cancel_requested_at_ms is null then 1.0 else t.progress end,
        lease_until_ms = null,
        completed_at_ms = clock.now_ms,
        updated_at_ms = clock.now_ms
    from fenced as f, clock
    where t.id = f.id
    returning t.id, t.status, t.queue, f.token, f.attempt, f.started_at_ms, clock.now_ms
),
recorded as (
    insert into cairnq_task_attempts (
        task_id, claim, attempt, worker_id, started_at_ms, ended_at_ms, outcome, error
    )
    select id, token, attempt, :worker_id::text, started_at_ms, now_ms, status, null
    from settled
    on conflict (task_id, claim) do nothing
)
select id, status, queue from settled;
