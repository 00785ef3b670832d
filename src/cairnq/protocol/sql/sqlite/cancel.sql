-- Cancels a task: queued becomes canceled, running gets cancel_requested_at_ms set.
-- Returns the updated row, or zero rows when there is no such task or it is already terminal.
-- params: id, now_ms
update cairnq_tasks
set status = case when status = 'queued' then 'canceled' else status end,
    completed_at_ms = case when status = 'queued' then :now_ms else completed_at_ms end,
    cancel_requested_at_ms = case when status = 'running' then :now_ms else cancel_requested_at_ms end,
    updated_at_ms = :now_ms
where id = :id and status in ('queued', 'running')
returning *;
