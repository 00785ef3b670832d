-- Partial index over terminal rows for purges filtered by queue.
-- Statements must repeat the status list word for word for SQLite to pick it.
create index if not exists cairnq_tasks_queue_completed_idx
    on cairnq_tasks (queue, completed_at_ms)
    where status in ('succeeded', 'failed', 'canceled');

update cairnq_meta set value = '9' where key = 'schema_version';
