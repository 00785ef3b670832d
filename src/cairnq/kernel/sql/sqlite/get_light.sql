-- Reads one task without its payload, result and metadata (null): for views that refresh often.
-- Returns the task row, or zero rows when there is no such task.
-- params: id
select id, name, queue, status, null as payload, null as result, error, null as metadata,
       progress, message, attempt, max_attempts, priority, worker_id, lease_until_ms, run_at_ms,
       cancel_requested_at_ms, parent_id, root_id, correlation_id, created_at_ms, updated_at_ms,
       completed_at_ms
from cairnq_tasks
where id = :id;
