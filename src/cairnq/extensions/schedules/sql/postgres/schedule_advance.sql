-- Moves a schedule's cursor (every slot at or before it is decided) and records its latest task.
-- Returns no rows.
-- params: name, cursor_ms, next_ms, last_slot_ms, last_task_id, now_ms
update cairnq_schedules
set cursor_ms = :cursor_ms::bigint, next_ms = :next_ms::bigint,
    last_slot_ms = :last_slot_ms::bigint, last_task_id = :last_task_id::text,
    updated_at_ms = :now_ms::bigint
where name = :name::text
