-- Moves a schedule's cursor (every slot at or before it is decided) and records its latest task.
-- Returns no rows.
-- params: name, cursor_ms, next_ms, last_slot_ms, last_task_id, now_ms
update cairnq_schedules
set cursor_ms = :cursor_ms, next_ms = :next_ms,
    last_slot_ms = :last_slot_ms, last_task_id = :last_task_id,
    updated_at_ms = :now_ms
where name = :name
