-- Reads one schedule with the status of the task its latest slot submitted.
-- Returns zero or one row.
-- params: name
select s.name, s.cron, s.every_ms, s.tz, s.task_name, s.queue, s.payload, s.metadata, s.priority, s.max_attempts, s.catch_up_ms, s.catch_up_policy, s.overlap, s.jitter_ms, s.paused, s.source, s.cursor_ms, s.next_ms, s.last_slot_ms, s.last_task_id, s.created_at_ms, s.updated_at_ms, t.status as last_status
from cairnq_schedules as s
left join cairnq_tasks as t on t.id = s.last_task_id
where s.name = :name
