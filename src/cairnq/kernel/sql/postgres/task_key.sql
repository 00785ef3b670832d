-- Reads the idempotency key that points at a task, if any (a scan of the key table: for one task's detail view).
-- Returns one row (key), or zero rows when no key points at the task.
-- params: task_id
select key from cairnq_task_keys where task_id = :task_id::text limit 1;
