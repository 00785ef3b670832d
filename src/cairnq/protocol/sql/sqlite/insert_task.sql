-- Inserts a queued task, due delay_ms after now.
-- Returns the inserted row.
-- params: id, name, queue, payload, metadata, max_attempts, priority, delay_ms, parent_id, root_id, correlation_id, now_ms
insert into cairnq_tasks (
    id, name, queue, status, payload, metadata, attempt, max_attempts, priority,
    run_at_ms, parent_id, root_id, correlation_id, created_at_ms, updated_at_ms
)
values (
    :id, :name, :queue, 'queued', :payload, :metadata, 0, :max_attempts, :priority,
    :now_ms + :delay_ms, :parent_id, :root_id, :correlation_id, :now_ms, :now_ms
)
returning *;
