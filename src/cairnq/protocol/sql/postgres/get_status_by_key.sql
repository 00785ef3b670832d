-- Reads the status of the task an idempotency key points at.
-- Returns (id, status), or zero rows when the key is unknown or its task was purged.
-- params: key
select t.id, t.status
from cairnq_task_keys as k
join cairnq_tasks as t on t.id = k.task_id
where k.key = :key::text;
