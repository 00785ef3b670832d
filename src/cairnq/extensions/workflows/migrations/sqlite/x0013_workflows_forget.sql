-- cairnq extension (not part of the reference protocol): cairnq_dependencies and
-- cairnq_parked (x0008) rebuilt without their foreign keys to cairnq_tasks; their rows go
-- with their task through a trigger on cairnq_tasks, as x0011_leases_forget.sql describes.
-- cairnq_dependencies_satisfied (x0010) keeps its foreign key to cairnq_dependencies, and
-- is rebuilt too: renaming cairnq_dependencies rewrites that key to name the old table.
-- The trigger deletes its rows as well, for a connection that left foreign keys off.
-- The tables as this file leaves them, should a repair find one dropped (a rename needs it).
create table if not exists cairnq_dependencies (
    task_id text not null,
    depends_on_id text not null,
    policy text not null check (policy in ('cancel', 'fail', 'run')),
    primary key (task_id, depends_on_id)
);
create table if not exists cairnq_dependencies_satisfied (
    task_id text not null,
    depends_on_id text not null,
    primary key (task_id, depends_on_id),
    foreign key (task_id, depends_on_id)
        references cairnq_dependencies (task_id, depends_on_id) on delete cascade
);
create table if not exists cairnq_parked (
    task_id text primary key,
    reason text not null check (reason in ('dependencies', 'gather')),
    delay_ms integer not null,
    parked_at_ms integer not null
);
drop trigger if exists cairnq_workflows_forget;
alter table cairnq_dependencies_satisfied rename to cairnq_dependencies_satisfied_old;
alter table cairnq_dependencies rename to cairnq_dependencies_old;
alter table cairnq_parked rename to cairnq_parked_old;
create table if not exists cairnq_dependencies (
    task_id text not null,
    depends_on_id text not null,
    policy text not null check (policy in ('cancel', 'fail', 'run')),
    primary key (task_id, depends_on_id)
);
create table if not exists cairnq_dependencies_satisfied (
    task_id text not null,
    depends_on_id text not null,
    primary key (task_id, depends_on_id),
    foreign key (task_id, depends_on_id)
        references cairnq_dependencies (task_id, depends_on_id) on delete cascade
);
create table if not exists cairnq_parked (
    task_id text primary key,
    reason text not null check (reason in ('dependencies', 'gather')),
    delay_ms integer not null,
    parked_at_ms integer not null
);
insert or replace into cairnq_dependencies (task_id, depends_on_id, policy)
select task_id, depends_on_id, policy from cairnq_dependencies_old
where task_id in (select id from cairnq_tasks);
insert or replace into cairnq_dependencies_satisfied (task_id, depends_on_id)
select s.task_id, s.depends_on_id from cairnq_dependencies_satisfied_old as s
where exists (
    select 1 from cairnq_dependencies as d
    where d.task_id = s.task_id and d.depends_on_id = s.depends_on_id
);
insert or replace into cairnq_parked (task_id, reason, delay_ms, parked_at_ms)
select task_id, reason, delay_ms, parked_at_ms from cairnq_parked_old
where task_id in (select id from cairnq_tasks);
-- The referencing table first: dropping a table deletes its rows, which would cascade.
drop table cairnq_dependencies_satisfied_old;
drop table cairnq_dependencies_old;
drop table cairnq_parked_old;
create index if not exists cairnq_dependencies_depends_on_idx
    on cairnq_dependencies (depends_on_id);
create trigger if not exists cairnq_workflows_forget
    after delete on cairnq_tasks
begin
    delete from cairnq_dependencies_satisfied where task_id = old.id;
    delete from cairnq_dependencies where task_id = old.id;
    delete from cairnq_parked where task_id = old.id;
end;
