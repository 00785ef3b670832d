-- Records the task a slot submitted.
-- Returns no rows.
-- params: schedule, slot_ms, task_id
update cairnq_schedule_slots
set task_id = :task_id::text
where schedule = :schedule::text and slot_ms = :slot_ms::bigint
