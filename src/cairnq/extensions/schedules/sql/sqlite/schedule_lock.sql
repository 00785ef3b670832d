-- Reads one schedule (inside the write transaction, which SQLite runs one at a time).
-- Returns zero or one row.
-- params: name
select name, cron, every_ms, tz, task_name, queue, payload, metadata, priority, max_attempts, catch_up_ms, catch_up_policy, overlap, jitter_ms, paused, source, cursor_ms, next_ms, last_slot_ms, last_task_id, created_at_ms, updated_at_ms
from cairnq_schedules
where name = :name
