-- Per queue, the earliest run_at_ms among its due queued tasks (run_at_ms <= now_ms), and how many there are.
-- Returns (queue, oldest_run_at_ms, due) rows, only for queues with a due queued task.
-- params: now_ms
select queue, min(run_at_ms) as oldest_run_at_ms, count(*) as due
from cairnq_tasks
where status = 'queued' and run_at_ms <= :now_ms::bigint
group by queue
order by queue;
