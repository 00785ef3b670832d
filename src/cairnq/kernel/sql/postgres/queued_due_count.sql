-- How many queued tasks of one name on one queue are due (run_at_ms <= now_ms), counted on the claim name index up to cap.
-- Returns one row (n, oldest_run_at_ms): n = cap means cap or more; oldest_run_at_ms is the earliest among those counted.
-- params: queue, name, now_ms, cap
select count(*) as n, min(run_at_ms) as oldest_run_at_ms
from (
    select run_at_ms from cairnq_tasks
    where queue = :queue::text and status = 'queued' and name = :name::text
        and run_at_ms <= :now_ms::bigint
    limit :cap::integer
) as due;
