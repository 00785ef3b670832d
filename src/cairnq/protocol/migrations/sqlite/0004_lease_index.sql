-- Partial index over live leases, read by recover_leases and the probe's lease arm.
-- Statements must repeat the predicate word for word for SQLite to pick it.
create index if not exists cairnq_tasks_lease_idx
    on cairnq_tasks (lease_until_ms)
    where status = 'running' and lease_until_ms is not null;

update cairnq_meta set value = '4' where key = 'schema_version';
