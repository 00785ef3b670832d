-- cairnq extension (not part of the reference protocol): cairnq_leases (x0003) rebuilt
-- without its foreign key to cairnq_tasks, as every cairnq extension table is; its rows go
-- with their task through a trigger on cairnq_tasks instead (SQLite runs it whether or not
-- the deleting connection turned foreign keys on). SQLite cannot drop a constraint, so the
-- table is renamed, created anew, filled from the old one (rows of tasks that are gone
-- are left behind) and the old one dropped. Every step may run again (a repair does): the
-- trigger goes first, since renaming a table rewrites the triggers that name it.
-- The table as this file leaves it, should a repair find it dropped (a rename needs it).
create table if not exists cairnq_leases (
    task_id text primary key,
    token integer not null
);
drop trigger if exists cairnq_leases_forget;
alter table cairnq_leases rename to cairnq_leases_old;
create table if not exists cairnq_leases (
    task_id text primary key,
    token integer not null
);
insert or replace into cairnq_leases (task_id, token)
select task_id, token from cairnq_leases_old
where task_id in (select id from cairnq_tasks);
drop table cairnq_leases_old;
create trigger if not exists cairnq_leases_forget
    after delete on cairnq_tasks
begin
    delete from cairnq_leases where task_id = old.id;
end;
