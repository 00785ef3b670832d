-- Per queue, how many queued tasks are not due yet (run_at_ms > now_ms): delayed, or a retry in backoff.
-- Returns (queue, count) rows, only for queues with such a task.
-- params: now_ms
select queue, count(*) as count
from cairnq_tasks
where status = 'queued' and run_at_ms > :now_ms::bigint
group by queue
order by queue;
