-- Records that a worker is alive: inserts its row (started now) or refreshes last_seen_ms and what it serves.
-- Returns no rows.
-- params: worker_id, queues, host, pid, concurrency, now_ms
with clock as materialized (
    select coalesce(:now_ms::bigint, floor(extract(epoch from clock_timestamp()) * 1000)::bigint) as now_ms
)
insert into cairnq_workers (worker_id, queues, host, pid, concurrency, started_at_ms, last_seen_ms)
select :worker_id::text, :queues::jsonb, :host::text, :pid::integer, :concurrency::integer,
       clock.now_ms, clock.now_ms
from clock
on conflict (worker_id) do update
set queues = excluded.queues,
    host = excluded.host,
    pid = excluded.pid,
    concurrency = excluded.concurrency,
    last_seen_ms = excluded.last_seen_ms;
