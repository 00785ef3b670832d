-- One page of tasks newest first (by id) before the keyset cursor before_id; no filter is required: the primary key is walked down and the filters checked on each row; null filters are off.
-- Returns task rows without payload, result and metadata (null), at most limit of them.
-- params: status, queue, name, root_id, correlation_id, id_low, id_high, before_id, limit
-- The primary key is walked newest first from the cursor (exclusive) or the newest id (inclusive):
-- both bounds are always set, so a generic or unbound plan still uses it as a range.
-- The id range compares in the C collation: code point order, as the prefix bounds are built.
select id, name, queue, status, null as payload, null as result, error, null as metadata,
       progress, message, attempt, max_attempts, priority, worker_id, lease_until_ms, run_at_ms,
       cancel_requested_at_ms, parent_id, root_id, correlation_id, created_at_ms, updated_at_ms,
       completed_at_ms
from cairnq_tasks
where (:status::text is null or status = :status)
  and (:queue::text is null or queue = :queue)
  and (:name::text is null or name = :name)
  and (:root_id::text is null or root_id = :root_id)
  and (:correlation_id::text is null or correlation_id = :correlation_id)
  and (:id_low::text is null or id collate "C" >= :id_low)
  and (:id_high::text is null or id collate "C" < :id_high)
  and id <= coalesce(:before_id::text, (select max(id) from cairnq_tasks))
  and id is distinct from :before_id::text
order by id desc
limit :limit::bigint;
