-- Drops the single-column status index, which status_completed_idx covers.
drop index if exists cairnq_tasks_status_idx;

update cairnq_meta set value = '10' where key = 'schema_version';
