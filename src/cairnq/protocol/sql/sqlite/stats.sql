-- Counts tasks per queue and status, for one queue or, when queue is null, for all.
-- Returns (queue, status, count) rows, or zero rows when no task matches.
-- params: queue
select queue, status, count(*) as count
from cairnq_tasks
where (:queue is null or queue = :queue)
group by queue, status
order by queue, status;
