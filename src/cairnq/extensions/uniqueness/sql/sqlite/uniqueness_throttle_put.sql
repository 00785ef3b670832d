-- Counts the task just inserted against its throttle key, for per_ms from now.
-- Returns nothing.
-- params: key, task_id, per_ms, now_ms
insert into cairnq_uniqueness_throttle (key, task_id, at_ms, until_ms)
values (:key, :task_id, :now_ms, :now_ms + :per_ms);
