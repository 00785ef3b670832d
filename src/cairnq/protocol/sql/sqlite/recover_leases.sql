-- Settles up to limit expired leases, oldest first: canceled if cancel was asked, queued if attempts remain, else failed.
-- Returns the updated rows, or zero rows when no lease has expired.
-- params: now_ms, lease_expired_error, limit
with expired as (
    select id,
           case
               when cancel_requested_at_ms is not null then 'canceled'
               when attempt < max_attempts then 'queued'
               else 'failed'
           end as next_status
    from cairnq_tasks
    where status = 'running' and lease_until_ms is not null
      and lease_until_ms <= :now_ms
    order by lease_until_ms
    limit :limit
)
update cairnq_tasks as t
set status = e.next_status,
    worker_id = case when e.next_status = 'queued' then null else t.worker_id end,
    progress = case when e.next_status = 'queued' then null else t.progress end,
    message = case when e.next_status = 'queued' then null else t.message end,
    run_at_ms = case when e.next_status = 'queued' then :now_ms else t.run_at_ms end,
    error = case when e.next_status = 'failed' then :lease_expired_error else t.error end,
    completed_at_ms = case when e.next_status = 'queued' then t.completed_at_ms else :now_ms end,
    lease_until_ms = null,
    updated_at_ms = :now_ms
from expired as e
where t.id = e.id
returning *;
