-- Reads one task's policies (cairnq_policies_tasks, x0020).
-- Returns its row, or none.
-- params: id
select task_id, expires_at_ms, started_at_ms, run_timeout_ms, retry::text as retry, reason, created_at_ms
from cairnq_policies_tasks where task_id = :id::text;
