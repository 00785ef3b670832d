-- Cancels a task: queued becomes canceled, running gets cancel_requested_at_ms set.
-- Returns the updated row, or zero rows when there is no such task or it is already terminal.
-- params: id, now_ms
with clock as materialized (
    select coalesce(:now_ms::bigint, floor(extract(epoch from clock_timestamp()) * 1000)::bigint) as now_ms
)
update cairnq_tasks
set status = case when status = 'queued' then 'canceled' else status end,
    completed_at_ms = case when status = 'queued' then (select now_ms from clock) else completed_at_ms end,
    cancel_requested_at_ms = case when status = 'running' then (select now_ms from clock) else cancel_requested_at_ms end,
    updated_at_ms = (select now_ms from clock)
where id = :id::text and status in ('queued', 'running')
returning *;
