-- cairnq extension (not part of the reference protocol): cairnq_limit_keys (x0006) rebuilt
-- without its foreign key to cairnq_tasks (the recipe of x0011_leases_forget.sql). A row
-- whose task is gone is harmless and needs no trigger: a limit counts only the rows of
-- running tasks (limit_running joins cairnq_tasks), and limited claims prune rows of tasks
-- not running (limit_keys_prune) now and then.
-- The table as this file leaves it, should a repair find it dropped (a rename needs it).
create table if not exists cairnq_limit_keys (
    task_id text not null,
    limit_name text not null,
    key_value text not null,
    primary key (task_id, limit_name)
);
alter table cairnq_limit_keys rename to cairnq_limit_keys_old;
create table if not exists cairnq_limit_keys (
    task_id text not null,
    limit_name text not null,
    key_value text not null,
    primary key (task_id, limit_name)
);
insert or replace into cairnq_limit_keys (task_id, limit_name, key_value)
select task_id, limit_name, key_value from cairnq_limit_keys_old
where task_id in (select id from cairnq_tasks);
drop table cairnq_limit_keys_old;
create index if not exists cairnq_limit_keys_limit_idx on cairnq_limit_keys (limit_name, key_value);
