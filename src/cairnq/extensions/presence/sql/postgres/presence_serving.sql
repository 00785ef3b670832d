-- Live cairnq workers (seen at or after since_ms) whose queues hold :queue and whose names hold :name.
-- Returns (worker_id, host, pid, names_known) rows; names_known is false for a worker that publishes no names (it may serve any).
-- params: since_ms, queue, name
select w.worker_id, w.host, w.pid, n.worker_id is not null as names_known
from cairnq_workers as w
left join cairnq_worker_names as n on n.worker_id = w.worker_id
where w.last_seen_ms >= :since_ms::bigint
    and w.queues @> jsonb_build_array(:queue::text)
    and (n.worker_id is null or n.names @> jsonb_build_array(:name::text))
order by w.worker_id;
