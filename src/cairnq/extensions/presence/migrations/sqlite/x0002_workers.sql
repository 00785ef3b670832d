-- cairnq extension (not part of the reference protocol): one row per live cairnq worker,
-- upserted on its heartbeat timer and deleted on a clean stop, read by the dashboard.
-- Reference SDKs ignore it; their workers show through their running tasks.
create table if not exists cairnq_workers (
    worker_id text primary key,
    queues text not null default '[]' check (json_valid(queues)),
    host text,
    pid integer,
    concurrency integer,
    started_at_ms integer not null,
    last_seen_ms integer not null
);
