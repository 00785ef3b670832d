-- Settles an attempt this transaction holds (hold ran first, so the row is locked): as complete, but the lease may have run out meanwhile.
-- Returns the updated row, or zero rows when the caller no longer owns the attempt (lost lease).
-- params: id, attempt, lease_token, worker_id, now_ms, result
with clock as materialized (
    select coalesce(:now_ms::bigint, floor(extract(epoch from clock_timestamp()) * 1000)::bigint) as now_ms
),
owned as materialized (
    select id
    from cairnq_tasks
    where id = :id::text and status = 'running' and worker_id = :worker_id::text
      and attempt = :attempt::integer
    for update
),
fenced as materialized (
    select task_id
    from cairnq_leases
    where task_id in (select id from owned) and token = :lease_token::bigint
    for share
)
update cairnq_tasks
set status = case when cancel_requested_at_ms is null then 'succeeded' else 'canceled' end,
    result = case when cancel_requested_at_ms is null then :result::jsonb else result end,
    progress = case when cancel_requested_at_ms is null then 1.0 else progress end,
    lease_until_ms = null,
    completed_at_ms = (select now_ms from clock),
    updated_at_ms = (select now_ms from clock)
where id in (select task_id from fenced)
returning *;
