-- The attempt history's fail: records error on an owned attempt as fail does (canceled if cancel was asked, queued after delay_ms if retryable with attempts left, else failed) and records the attempt with its error (extension table cairnq_task_attempts, x0009; outcome retry when queued) in the same statement, under claim (the claim's nonce) and worker (the worker id alone); started_at_ms is when it was claimed (null: not known).
-- Returns the updated row, or zero rows when the caller no longer owns the attempt (lost lease).
-- params: id, attempt, worker_id, now_ms, error, retryable, delay_ms, claim, worker, started_at_ms
with clock as materialized (
    select coalesce(:now_ms::bigint, floor(extract(epoch from clock_timestamp()) * 1000)::bigint) as now_ms
),
decided as materialized (
    select id,
           case
               when cancel_requested_at_ms is not null then 'canceled'
               when :retryable::boolean and attempt < max_attempts then 'queued'
               else 'failed'
           end as next_status
    from cairnq_tasks
    where id = :id::text and status = 'running' and worker_id = :worker_id::text
      and attempt = :attempt::integer and lease_until_ms > (select now_ms from clock)
    for update
),
settled as (
    update cairnq_tasks as t
    set status = d.next_status,
        error = :error::jsonb,
        worker_id = case when d.next_status = 'queued' then null else t.worker_id end,
        progress = case when d.next_status = 'queued' then null else t.progress end,
        message = case when d.next_status = 'queued' then null else t.message end,
        run_at_ms = case when d.next_status = 'queued' then (select now_ms from clock) + :delay_ms::bigint else t.run_at_ms end,
        completed_at_ms = case when d.next_status = 'queued' then null else (select now_ms from clock) end,
        lease_until_ms = null,
        updated_at_ms = (select now_ms from clock)
    from decided as d
    where t.id = d.id
    returning t.*
),
recorded as (
    insert into cairnq_task_attempts (
        task_id, claim, attempt, worker_id, started_at_ms, ended_at_ms, outcome, error
    )
    select id, :claim::bigint, :attempt::integer, :worker::text,
           :started_at_ms::bigint, updated_at_ms,
           case when status = 'queued' then 'retry' else status end, :error::jsonb
    from settled
    on conflict (task_id, claim) do nothing
)
select * from settled;
