-- Locks an owned attempt's row until the transaction ends (succeed_in): a cancel that has not landed yet waits for the settlement that follows, and neither recovery nor a heartbeat touches the row meanwhile.
-- Returns (cancel_requested_at_ms) of the owned row, or zero rows when the caller no longer owns the attempt (lost lease).
-- params: id, attempt, lease_token, worker_id, now_ms
with clock as materialized (
    select coalesce(:now_ms::bigint, floor(extract(epoch from clock_timestamp()) * 1000)::bigint) as now_ms
),
owned as materialized (
    select id, cancel_requested_at_ms
    from cairnq_tasks
    where id = :id::text and status = 'running' and worker_id = :worker_id::text
      and attempt = :attempt::integer and lease_until_ms > (select now_ms from clock)
    for update
),
fenced as materialized (
    select task_id
    from cairnq_leases
    where task_id in (select id from owned) and token = :lease_token::bigint
    for share
)
select o.cancel_requested_at_ms
from owned as o
where o.id in (select task_id from fenced);
