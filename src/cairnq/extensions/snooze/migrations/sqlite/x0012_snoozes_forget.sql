-- cairnq extension (not part of the reference protocol): cairnq_task_snoozes (x0007)
-- rebuilt without its foreign key to cairnq_tasks; its rows go with their task through a
-- trigger on cairnq_tasks, as x0011_leases_forget.sql describes.
-- The table as this file leaves it, should a repair find it dropped (a rename needs it).
create table if not exists cairnq_task_snoozes (
    task_id text primary key,
    count integer not null,
    last_snoozed_at_ms integer not null,
    last_delay_ms integer not null
);
drop trigger if exists cairnq_snoozes_forget;
alter table cairnq_task_snoozes rename to cairnq_task_snoozes_old;
create table if not exists cairnq_task_snoozes (
    task_id text primary key,
    count integer not null,
    last_snoozed_at_ms integer not null,
    last_delay_ms integer not null
);
insert or replace into cairnq_task_snoozes (task_id, count, last_snoozed_at_ms, last_delay_ms)
select task_id, count, last_snoozed_at_ms, last_delay_ms from cairnq_task_snoozes_old
where task_id in (select id from cairnq_tasks);
drop table cairnq_task_snoozes_old;
create trigger if not exists cairnq_snoozes_forget
    after delete on cairnq_tasks
begin
    delete from cairnq_task_snoozes where task_id = old.id;
end;
