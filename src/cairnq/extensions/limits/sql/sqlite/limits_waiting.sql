-- How many due queued tasks a limit's scope holds (a queue, or a task name), counted up to cap.
-- Returns one row (waiting).
-- params: queue, name, now_ms, cap
select count(*) as waiting
from (
    select 1
    from cairnq_tasks
    where status = 'queued'
      and run_at_ms <= :now_ms
      and (:queue is null or queue = :queue)
      and (:name is null or name = :name)
    limit :cap
);
