-- Stores a new schedule (extension table cairnq_schedules, x0005) unless one has the name.
-- Returns the stored row; zero rows when the name is taken.
-- params: name, cron, every_ms, tz, task_name, queue, payload, metadata, priority, max_attempts, catch_up_ms, catch_up_policy, overlap, jitter_ms, paused, source, cursor_ms, next_ms, now_ms
insert into cairnq_schedules (name, cron, every_ms, tz, task_name, queue, payload, metadata, priority, max_attempts, catch_up_ms, catch_up_policy, overlap, jitter_ms, paused, source, cursor_ms, next_ms, last_slot_ms, last_task_id, created_at_ms, updated_at_ms)
values (:name::text, :cron::text, :every_ms::bigint, :tz::text, :task_name::text, :queue::text,
    :payload::jsonb, :metadata::jsonb, :priority::integer, :max_attempts::integer, :catch_up_ms::bigint,
    :catch_up_policy::text, :overlap::text, :jitter_ms::bigint, :paused::boolean, :source::text,
    :cursor_ms::bigint, :next_ms::bigint, null, null, :now_ms::bigint, :now_ms::bigint)
on conflict (name) do nothing
returning name, cron, every_ms, tz, task_name, queue, payload, metadata, priority, max_attempts, catch_up_ms, catch_up_policy, overlap, jitter_ms, paused, source, cursor_ms, next_ms, last_slot_ms, last_task_id, created_at_ms, updated_at_ms
