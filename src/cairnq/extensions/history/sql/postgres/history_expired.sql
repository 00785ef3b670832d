-- Reads up to limit running tasks whose lease has expired, oldest first, with their claimant (for the attempt history of a recovery: a cairnq worker's claim names its nonce in worker_id).
-- Returns (id, attempt, worker_id, updated_at_ms) per task, or zero rows when no lease has expired.
-- params: now_ms, limit
with clock as materialized (
    select coalesce(:now_ms::bigint, floor(extract(epoch from clock_timestamp()) * 1000)::bigint) as now_ms
)
select t.id, t.attempt, t.worker_id, t.updated_at_ms
from cairnq_tasks as t
where t.status = 'running' and t.lease_until_ms is not null
  and t.lease_until_ms <= (select now_ms from clock)
order by t.lease_until_ms
limit :limit::bigint;
