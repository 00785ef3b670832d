-- Reads the task id an idempotency key points at.
-- Returns (task_id), or zero rows when the key is unused.
-- params: key
select task_id from cairnq_task_keys where key = :key::text;
