-- Records error on an owned attempt: canceled if cancel was asked, queued after delay_ms if retryable with attempts left, else failed.
-- Returns the updated row, or zero rows when the caller no longer owns the attempt (lost lease).
-- params: id, attempt, worker_id, now_ms, error, retryable, delay_ms
with decided as (
    select id,
           case
               when cancel_requested_at_ms is not null then 'canceled'
               when :retryable and attempt < max_attempts then 'queued'
               else 'failed'
           end as next_status
    from cairnq_tasks
    where id = :id and status = 'running' and worker_id = :worker_id
      and attempt = :attempt and lease_until_ms > :now_ms
)
update cairnq_tasks as t
set status = d.next_status,
    error = :error,
    worker_id = case when d.next_status = 'queued' then null else t.worker_id end,
    progress = case when d.next_status = 'queued' then null else t.progress end,
    message = case when d.next_status = 'queued' then null else t.message end,
    run_at_ms = case when d.next_status = 'queued' then :now_ms + :delay_ms else t.run_at_ms end,
    completed_at_ms = case when d.next_status = 'queued' then null else :now_ms end,
    lease_until_ms = null,
    updated_at_ms = :now_ms
from decided as d
where t.id = d.id
returning *;
