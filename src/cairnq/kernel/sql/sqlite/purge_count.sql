-- Counts the terminal tasks purge would delete with the same filters and cutoff, stopping at cap.
-- Returns one row (n), n <= cap: cap means at least cap such tasks exist.
-- params: older_than_ms, queue, status, name, cap, now_ms
select count(*) as n
from (
    select 1
    from cairnq_tasks
    where status in ('succeeded', 'failed', 'canceled')
      and (:queue is null or queue = :queue)
      and (:status is null or status = :status)
      and (:name is null or name = :name)
      and completed_at_ms is not null
      and completed_at_ms < :now_ms - :older_than_ms
    limit :cap
) as matches;
