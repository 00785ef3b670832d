-- Partial index over terminal rows for purges filtered by queue.
-- Statements spell the same status list out, as the SQLite twin requires.
create index if not exists cairnq_tasks_queue_completed_idx
    on cairnq_tasks (queue, completed_at_ms)
    where status in ('succeeded', 'failed', 'canceled');

update cairnq_meta set value = '9' where key = 'schema_version';
