-- Counts per status the terminal tasks purge would delete: completed over older_than_ms ago. Null filters are off.
-- Returns (status, count) rows, or zero rows when nothing is old enough.
-- params: older_than_ms, queue, status, name, now_ms
select status, count(*) as count
from cairnq_tasks
where status in ('succeeded', 'failed', 'canceled')
  and (:queue is null or queue = :queue)
  and (:status is null or status = :status)
  and (:name is null or name = :name)
  and completed_at_ms is not null
  and completed_at_ms < :now_ms - :older_than_ms
group by status
order by status;
