-- Claim index with the handler name pinned after queue and status, for the
-- single-name claim variants. 0008 replaces its definition.
create index if not exists cairnq_tasks_claim_name_idx
    on cairnq_tasks (queue, status, name, priority desc, created_at_ms);

update cairnq_meta set value = '6' where key = 'schema_version';
