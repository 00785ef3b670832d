-- Reads the policies of claimed tasks (cairnq_policies_tasks, x0020), with this statement's clock.
-- Returns one row per task with policies: task_id, expires_at_ms, started_at_ms, run_timeout_ms, retry, now_ms.
-- params: ids, now_ms
select task_id, expires_at_ms, started_at_ms, run_timeout_ms, retry, :now_ms as now_ms
from cairnq_policies_tasks
where task_id in (select value from json_each(:ids));
