-- Records that a cairnq worker let tasks with an expiry start (cairnq_policies_tasks, x0020): their expiry no longer applies.
-- Returns nothing.
-- params: ids, now_ms
update cairnq_policies_tasks
set started_at_ms = coalesce(:now_ms::bigint, floor(extract(epoch from clock_timestamp()) * 1000)::bigint)
where task_id = any(:ids::text[]) and started_at_ms is null;
