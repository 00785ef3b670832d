-- How many due queued tasks a limit's scope holds (a queue, or a task name), counted up to cap.
-- Returns one row (waiting).
-- params: queue, name, now_ms, cap
select count(*) as waiting
from (
    select 1
    from cairnq_tasks
    where status = 'queued'
      and run_at_ms <= coalesce(:now_ms::bigint, floor(extract(epoch from clock_timestamp()) * 1000)::bigint)
      and (:queue::text is null or queue = :queue::text)
      and (:name::text is null or name = :name::text)
    limit :cap::bigint
) as scoped;
