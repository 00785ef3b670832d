-- cairnq extension (not part of the reference protocol): a running count per limit and key
-- (cairnq_limit_counts), so a limited claim reads the counts of the keys it admits with its
-- candidates, instead of counting the running tasks from cairnq_limit_keys. On SQLite the
-- counts follow the recorded keys through triggers: recording a key adds one, forgetting it
-- (a settlement or recovery by a cairnq worker, a prune, the sweep) takes one away, and
-- claims, serialised by the write transaction, read exact counts. A reference SDK worker
-- that settles or recovers a limited task forgets nothing: cairnq workers prune the keys of
-- tasks no longer running now and then (limits_keys_prune). granted is kept for the same
-- shape as on PostgreSQL. The counts start from the keys recorded now (those of tasks no
-- longer running go at the first reconciliation).
create table if not exists cairnq_limit_counts (
    limit_name text not null,
    key_value text not null,
    running integer not null default 0,
    granted integer not null default 0,
    primary key (limit_name, key_value)
);
insert into cairnq_limit_counts (limit_name, key_value, running)
select limit_name, key_value, count(*)
from cairnq_limit_keys
where true
group by limit_name, key_value
on conflict (limit_name, key_value) do update set running = excluded.running;
create trigger if not exists cairnq_limit_keys_count_in
after insert on cairnq_limit_keys
begin
    insert into cairnq_limit_counts (limit_name, key_value, running)
    values (new.limit_name, new.key_value, 1)
    on conflict (limit_name, key_value) do update set running = running + 1;
end;
create trigger if not exists cairnq_limit_keys_count_out
after delete on cairnq_limit_keys
begin
    update cairnq_limit_counts set running = max(0, running - 1)
    where limit_name = old.limit_name and key_value = old.key_value;
end;
create trigger if not exists cairnq_limit_keys_count_moved
after update of limit_name, key_value on cairnq_limit_keys
begin
    update cairnq_limit_counts set running = max(0, running - 1)
    where limit_name = old.limit_name and key_value = old.key_value;
    insert into cairnq_limit_counts (limit_name, key_value, running)
    values (new.limit_name, new.key_value, 1)
    on conflict (limit_name, key_value) do update set running = running + 1;
end;
