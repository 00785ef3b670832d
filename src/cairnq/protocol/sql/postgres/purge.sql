-- Deletes up to limit terminal tasks completed over older_than_ms ago, oldest first. Null filters are off, keys cascade.
-- Returns (id) per deleted task, or zero rows when nothing is old enough.
-- params: older_than_ms, queue, status, name, limit, now_ms
with clock as materialized (
    select coalesce(:now_ms::bigint, floor(extract(epoch from clock_timestamp()) * 1000)::bigint) as now_ms
),
doomed as materialized (
    select id
    from cairnq_tasks
    where status in ('succeeded', 'failed', 'canceled')
      and (:queue::text is null or queue = :queue)
      and (:status::text is null or status = :status)
      and (:name::text is null or name = :name)
      and completed_at_ms is not null
      and completed_at_ms < (select now_ms from clock) - :older_than_ms::bigint
    order by completed_at_ms asc
    limit :limit::bigint
    for update skip locked
)
delete from cairnq_tasks
where id in (select id from doomed)
  and status in ('succeeded', 'failed', 'canceled')
returning id;
