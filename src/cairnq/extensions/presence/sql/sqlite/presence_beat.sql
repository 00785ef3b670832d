-- Records that a worker is alive: inserts its row (started now) or refreshes last_seen_ms and what it serves.
-- Returns no rows.
-- params: worker_id, queues, host, pid, concurrency, now_ms
insert into cairnq_workers (worker_id, queues, host, pid, concurrency, started_at_ms, last_seen_ms)
values (:worker_id, :queues, :host, :pid, :concurrency, :now_ms, :now_ms)
on conflict (worker_id) do update
set queues = excluded.queues,
    host = excluded.host,
    pid = excluded.pid,
    concurrency = excluded.concurrency,
    last_seen_ms = excluded.last_seen_ms;
