-- What live cairnq workers (seen at or after since_ms) serve: their queues and task names.
-- Returns (worker_id, queues, names) rows; names is null for a worker that publishes none (it may serve any).
-- params: since_ms
select w.worker_id, w.queues, n.names
from cairnq_workers as w
left join cairnq_worker_names as n on n.worker_id = w.worker_id
where w.last_seen_ms >= :since_ms
order by w.worker_id;
