-- Pauses or resumes a schedule, setting its cursor and next slot.
-- Returns the updated row; zero rows when no schedule has the name.
-- params: name, paused, cursor_ms, next_ms, now_ms
update cairnq_schedules
set paused = :paused::boolean, cursor_ms = :cursor_ms::bigint, next_ms = :next_ms::bigint,
    updated_at_ms = :now_ms::bigint
where name = :name::text
returning name, cron, every_ms, tz, task_name, queue, payload, metadata, priority, max_attempts, catch_up_ms, catch_up_policy, overlap, jitter_ms, paused, source, cursor_ms, next_ms, last_slot_ms, last_task_id, created_at_ms, updated_at_ms
