-- cairnq extension (not part of the reference protocol): one row per periodic job run under
-- a named lease (cairnq._periodic): which process runs it, until when its lease holds
-- unless renewed, and when it last ran. Only the holder runs the job; another process
-- takes the row over once until_ms has passed. Reference SDKs ignore it.
create table if not exists cairnq_named_leases (
    name text primary key,
    holder text not null,
    until_ms bigint not null,
    last_run_ms bigint not null
);
