-- Counts per status the terminal tasks purge would delete: completed over older_than_ms ago. Null filters are off.
-- Returns (status, count) rows, or zero rows when nothing is old enough.
-- params: older_than_ms, queue, status, name, now_ms
with clock as materialized (
    select coalesce(:now_ms::bigint, floor(extract(epoch from clock_timestamp()) * 1000)::bigint) as now_ms
)
select status, count(*) as count
from cairnq_tasks
where status in ('succeeded', 'failed', 'canceled')
  and (:queue::text is null or queue = :queue)
  and (:status::text is null or status = :status)
  and (:name::text is null or name = :name)
  and completed_at_ms is not null
  and completed_at_ms < (select now_ms from clock) - :older_than_ms::bigint
group by status
order by status;
