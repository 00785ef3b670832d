-- cairnq extension (not part of the reference protocol): a running count per limit and key
-- (cairnq_limit_counts), so a limited claim reads the counts of the keys it admits in one
-- statement and locks only those keys' rows, instead of every claim under a limit locking
-- the limit's row and counting the running tasks from cairnq_limit_keys. A limited claim
-- adds to the count of each key it admits, only while the count stays within the limit
-- (limits_take); a cairnq worker's settlement or recovery of a limited task subtracts from
-- it (limits_release). A reference SDK worker that settles or recovers such a task does
-- not, and purges or truncates can leave recorded keys behind: cairnq workers reconcile the
-- counts from the recorded keys of running tasks now and then (limits_keys_prune,
-- limits_counts_fix). granted is what the last claim that touched the row was granted.
-- The counts start from the keys recorded now (those of tasks no longer running go at the
-- first reconciliation).
create table if not exists cairnq_limit_counts (
    limit_name text not null,
    key_value text not null,
    running bigint not null default 0,
    granted bigint not null default 0,
    primary key (limit_name, key_value)
);
insert into cairnq_limit_counts (limit_name, key_value, running)
select limit_name, key_value, count(*)
from cairnq_limit_keys
group by limit_name, key_value
on conflict (limit_name, key_value) do update set running = excluded.running;
