-- Reads how many times a task was snoozed (extension table cairnq_task_snoozes, x0007).
-- Returns one row (count, last_snoozed_at_ms, last_delay_ms), or zero rows when it never was.
-- params: id
select count, last_snoozed_at_ms, last_delay_ms
from cairnq_task_snoozes
where task_id = :id;
