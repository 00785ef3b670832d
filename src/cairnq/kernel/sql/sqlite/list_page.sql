-- One page of tasks newest first (by id) before the keyset cursor before_id; no filter is required: the primary key is walked down and the filters checked on each row; null filters are off.
-- Returns task rows without payload, result and metadata (null), at most limit of them.
-- params: status, queue, name, root_id, correlation_id, id_low, id_high, before_id, limit
-- The primary key is walked newest first from the cursor (exclusive) or the newest id (inclusive):
-- both bounds are always set, so a generic or unbound plan still uses it as a range.
select id, name, queue, status, null as payload, null as result, error, null as metadata,
       progress, message, attempt, max_attempts, priority, worker_id, lease_until_ms, run_at_ms,
       cancel_requested_at_ms, parent_id, root_id, correlation_id, created_at_ms, updated_at_ms,
       completed_at_ms
from cairnq_tasks
where (:status is null or status = :status)
  and (:queue is null or queue = :queue)
  and (:name is null or name = :name)
  and (:root_id is null or root_id = :root_id)
  and (:correlation_id is null or correlation_id = :correlation_id)
  and (:id_low is null or id >= :id_low)
  and (:id_high is null or id < :id_high)
  and id <= coalesce(:before_id, (select max(id) from cairnq_tasks))
  and id is not :before_id
order by id desc
limit :limit;
