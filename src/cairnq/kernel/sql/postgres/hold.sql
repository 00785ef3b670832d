-- Locks an owned attempt's row until the transaction ends (succeed_in): a cancel that has not landed yet waits for the settlement that follows, and neither recovery nor a heartbeat touches the row meanwhile.
-- Returns (cancel_requested_at_ms) of the owned row, or zero rows when the caller no longer owns the attempt (lost lease).
-- params: id, attempt, worker_id, now_ms
with clock as materialized (
    select coalesce(:now_ms::bigint, floor(extract(epoch from clock_timestamp()) * 1000)::bigint) as now_ms
)
select cancel_requested_at_ms
from cairnq_tasks
where id = :id::text and status = 'running' and worker_id = :worker_id::text
  and attempt = :attempt::integer and lease_until_ms > (select now_ms from clock)
for update;
