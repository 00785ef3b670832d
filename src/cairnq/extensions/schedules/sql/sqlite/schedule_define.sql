-- Replaces a schedule's definition, keeping its cursor, history and last task; next_ms is the first slot after the cursor under the new definition.
-- Returns the updated row; zero rows when no schedule has the name.
-- params: name, cron, every_ms, tz, task_name, queue, payload, metadata, priority, max_attempts, catch_up_ms, catch_up_policy, overlap, jitter_ms, source, next_ms, now_ms
update cairnq_schedules
set cron = :cron, every_ms = :every_ms, tz = :tz, task_name = :task_name,
    queue = :queue, payload = :payload, metadata = :metadata,
    priority = :priority, max_attempts = :max_attempts,
    catch_up_ms = :catch_up_ms, catch_up_policy = :catch_up_policy,
    overlap = :overlap, jitter_ms = :jitter_ms, source = :source,
    next_ms = :next_ms, updated_at_ms = :now_ms
where name = :name
returning name, cron, every_ms, tz, task_name, queue, payload, metadata, priority, max_attempts, catch_up_ms, catch_up_policy, overlap, jitter_ms, paused, source, cursor_ms, next_ms, last_slot_ms, last_task_id, created_at_ms, updated_at_ms
