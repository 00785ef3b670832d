-- Data fix: a lease only exists on a running row, so clear any left on other rows.
update cairnq_tasks set lease_until_ms = null
    where status <> 'running' and lease_until_ms is not null;

update cairnq_meta set value = '5' where key = 'schema_version';
