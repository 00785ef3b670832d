-- Records that a cairnq worker let tasks with an expiry start (cairnq_policies_tasks, x0020): their expiry no longer applies.
-- Returns nothing.
-- params: ids, now_ms
update cairnq_policies_tasks
set started_at_ms = :now_ms
where task_id in (select value from json_each(:ids)) and started_at_ms is null;
