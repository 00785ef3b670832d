-- Deletes up to limit terminal tasks completed over older_than_ms ago, oldest first. Null filters are off, keys cascade.
-- Returns (id) per deleted task, or zero rows when nothing is old enough.
-- params: older_than_ms, queue, status, name, limit, now_ms
delete from cairnq_tasks
where id in (
    select id
    from cairnq_tasks
    where status in ('succeeded', 'failed', 'canceled')
      and (:queue is null or queue = :queue)
      and (:status is null or status = :status)
      and (:name is null or name = :name)
      and completed_at_ms is not null
      and completed_at_ms < :now_ms - :older_than_ms
    order by completed_at_ms asc
    limit :limit
)
returning id;
