-- Reads the lease columns of the given tasks, taking no locks.
-- Returns one row per existing id. An id left out no longer exists.
-- params: ids
select id, status, worker_id, attempt, lease_until_ms, cancel_requested_at_ms
from cairnq_tasks
where id = any(:ids::text[]);
