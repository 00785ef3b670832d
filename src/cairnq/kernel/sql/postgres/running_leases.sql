-- Running tasks whose lease is live at now_ms (the lease index), by worker then age.
-- Returns task rows without payload, result and metadata (null), at most limit of them.
-- params: now_ms, limit
select id, name, queue, status, null as payload, null as result, error, null as metadata,
       progress, message, attempt, max_attempts, priority, worker_id, lease_until_ms, run_at_ms,
       cancel_requested_at_ms, parent_id, root_id, correlation_id, created_at_ms, updated_at_ms,
       completed_at_ms
from cairnq_tasks
where status = 'running' and lease_until_ms is not null and lease_until_ms > :now_ms::bigint
order by worker_id, created_at_ms, id
limit :limit::bigint;
