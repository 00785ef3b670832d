-- Partial index over live leases, read by recover_leases and the probe's lease arm.
-- Statements spell the same predicate out, as the SQLite twin requires.
create index if not exists cairnq_tasks_lease_idx
    on cairnq_tasks (lease_until_ms)
    where status = 'running' and lease_until_ms is not null;

update cairnq_meta set value = '4' where key = 'schema_version';
