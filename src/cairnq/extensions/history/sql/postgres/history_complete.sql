-- The attempt history's complete: settles an owned attempt as complete does (succeeded with result, or canceled, result kept, when a cancel was requested) and records it (extension table cairnq_task_attempts, x0009) in the same statement, under claim (the claim's nonce) and worker (the worker id alone); started_at_ms is when it was claimed (null: not known).
-- Returns the updated row, or zero rows when the caller no longer owns the attempt (lost lease).
-- params: id, attempt, worker_id, now_ms, result, claim, worker, started_at_ms
with clock as materialized (
    select coalesce(:now_ms::bigint, floor(extract(epoch from clock_timestamp()) * 1000)::bigint) as now_ms
),
settled as (
    update cairnq_tasks
    set status = case when cancel_requested_at_ms is null then 'succeeded' else 'canceled' end,
        result = case when cancel_requested_at_ms is null then :result::jsonb else result end,
        progress = case when cancel_requested_at_ms is null then 1.0 else progress end,
        lease_until_ms = null,
        completed_at_ms = (select now_ms from clock),
        updated_at_ms = (select now_ms from clock)
    where id = :id::text and status = 'running' and worker_id = :worker_id::text
      and attempt = :attempt::integer and lease_until_ms > (select now_ms from clock)
    returning *
),
recorded as (
    insert into cairnq_task_attempts (
        task_id, claim, attempt, worker_id, started_at_ms, ended_at_ms, outcome, error
    )
    select id, :claim::bigint, :attempt::integer, :worker::text,
           :started_at_ms::bigint, updated_at_ms, status, null
    from settled
    on conflict (task_id, claim) do nothing
)
select * from settled;
