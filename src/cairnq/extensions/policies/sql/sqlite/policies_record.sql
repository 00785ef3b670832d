-- Records the policies one submit gave a task (cairnq_policies_tasks, x0020).
-- Returns nothing.
-- params: id, expires_in_ms (null: no expiry), run_timeout_ms, retry (JSON text), now_ms
insert into cairnq_policies_tasks (task_id, expires_at_ms, run_timeout_ms, retry, created_at_ms)
values (
    :id,
    case when :expires_in_ms is null then null else :now_ms + :expires_in_ms end,
    :run_timeout_ms,
    :retry,
    :now_ms
);
