-- Counts the terminal tasks purge would delete with the same filters and cutoff, stopping at cap.
-- Returns one row (n), n <= cap: cap means at least cap such tasks exist.
-- params: older_than_ms, queue, status, name, cap, now_ms
with clock as materialized (
    select coalesce(:now_ms::bigint, floor(extract(epoch from clock_timestamp()) * 1000)::bigint) as now_ms
)
select count(*) as n
from (
    select 1
    from cairnq_tasks
    where status in ('succeeded', 'failed', 'canceled')
      and (:queue::text is null or queue = :queue)
      and (:status::text is null or status = :status)
      and (:name::text is null or name = :name)
      and completed_at_ms is not null
      and completed_at_ms < (select now_ms from clock) - :older_than_ms::bigint
    limit :cap::bigint
) as matches;
