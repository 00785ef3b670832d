-- Settles up to limit expired leases, oldest first: canceled if cancel was asked, queued if attempts remain, else failed.
-- Returns the updated rows, or zero rows when no lease has expired.
-- params: now_ms, lease_expired_error, limit
with clock as materialized (
    select coalesce(:now_ms::bigint, floor(extract(epoch from clock_timestamp()) * 1000)::bigint) as now_ms
),
expired as materialized (
    select id,
           case
               when cancel_requested_at_ms is not null then 'canceled'
               when attempt < max_attempts then 'queued'
               else 'failed'
           end as next_status
    from cairnq_tasks
    where status = 'running' and lease_until_ms is not null
      and lease_until_ms <= (select now_ms from clock)
    order by lease_until_ms
    limit :limit::bigint
    for update skip locked
)
update cairnq_tasks as t
set status = e.next_status,
    worker_id = case when e.next_status = 'queued' then null else t.worker_id end,
    progress = case when e.next_status = 'queued' then null else t.progress end,
    message = case when e.next_status = 'queued' then null else t.message end,
    run_at_ms = case when e.next_status = 'queued' then (select now_ms from clock) else t.run_at_ms end,
    error = case when e.next_status = 'failed' then :lease_expired_error::jsonb else t.error end,
    completed_at_ms = case when e.next_status = 'queued' then t.completed_at_ms else (select now_ms from clock) end,
    lease_until_ms = null,
    updated_at_ms = (select now_ms from clock)
from expired as e
where t.id = e.id
  and t.status = 'running'
  and t.lease_until_ms <= (select now_ms from clock)
returning t.*;
