-- Reads the task an idempotency key points at.
-- Returns the task row, or zero rows when the key is unknown or its task was purged.
-- params: key
select t.*
from cairnq_task_keys as k
join cairnq_tasks as t on t.id = k.task_id
where k.key = :key::text;
