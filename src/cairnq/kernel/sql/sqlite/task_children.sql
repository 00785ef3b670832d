-- Tasks whose parent is parent_id, found through the root index (children share their parent's root), oldest first.
-- Returns task rows without payload, result and metadata (null), at most limit of them.
-- params: root_id, parent_id, limit
select id, name, queue, status, null as payload, null as result, error, null as metadata,
       progress, message, attempt, max_attempts, priority, worker_id, lease_until_ms, run_at_ms,
       cancel_requested_at_ms, parent_id, root_id, correlation_id, created_at_ms, updated_at_ms,
       completed_at_ms
from cairnq_tasks
where root_id = :root_id and parent_id = :parent_id
order by created_at_ms asc, id asc
limit :limit;
