-- cairnq workers (extension table) whose last heartbeat is at or after since_ms.
-- Returns worker rows (worker_id, queues, host, pid, concurrency, started_at_ms, last_seen_ms).
-- params: since_ms
select worker_id, queues, host, pid, concurrency, started_at_ms, last_seen_ms
from cairnq_workers
where last_seen_ms >= :since_ms
order by worker_id;
