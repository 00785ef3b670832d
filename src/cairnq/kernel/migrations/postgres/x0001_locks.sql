-- cairnq extension (not part of the reference protocol): named leases for work that
-- one process at a time should do, such as a retention sweep. Reference SDKs ignore it.
create table if not exists cairnq_locks (
    name text primary key,
    holder text not null,
    until_ms bigint not null
);
