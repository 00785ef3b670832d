-- cairnq extension (not part of the reference protocol): cairnq_task_steps and
-- cairnq_task_attempts (x0009) rebuilt without their foreign keys to cairnq_tasks; their
-- rows go with their task through a trigger on cairnq_tasks, as x0011_leases_forget.sql
-- describes.
-- The tables as this file leaves them, should a repair find one dropped (a rename needs it).
create table if not exists cairnq_task_steps (
    task_id text not null,
    name text not null,
    seq integer not null,
    result text not null check (json_valid(result)),
    attempt integer not null,
    recorded_at_ms integer not null,
    primary key (task_id, name)
);
create table if not exists cairnq_task_attempts (
    task_id text not null,
    claim integer not null,
    attempt integer not null,
    worker_id text,
    started_at_ms integer,
    ended_at_ms integer not null,
    outcome text not null check (
        outcome in ('succeeded', 'failed', 'retry', 'canceled', 'snoozed', 'lost', 'released')
    ),
    error text check (error is null or json_valid(error)),
    primary key (task_id, claim)
);
drop trigger if exists cairnq_steps_forget;
alter table cairnq_task_steps rename to cairnq_task_steps_old;
alter table cairnq_task_attempts rename to cairnq_task_attempts_old;
create table if not exists cairnq_task_steps (
    task_id text not null,
    name text not null,
    seq integer not null,
    result text not null check (json_valid(result)),
    attempt integer not null,
    recorded_at_ms integer not null,
    primary key (task_id, name)
);
create table if not exists cairnq_task_attempts (
    task_id text not null,
    claim integer not null,
    attempt integer not null,
    worker_id text,
    started_at_ms integer,
    ended_at_ms integer not null,
    outcome text not null check (
        outcome in ('succeeded', 'failed', 'retry', 'canceled', 'snoozed', 'lost', 'released')
    ),
    error text check (error is null or json_valid(error)),
    primary key (task_id, claim)
);
insert or replace into cairnq_task_steps (task_id, name, seq, result, attempt, recorded_at_ms)
select task_id, name, seq, result, attempt, recorded_at_ms from cairnq_task_steps_old
where task_id in (select id from cairnq_tasks);
insert or replace into cairnq_task_attempts (
    task_id, claim, attempt, worker_id, started_at_ms, ended_at_ms, outcome, error
)
select task_id, claim, attempt, worker_id, started_at_ms, ended_at_ms, outcome, error
from cairnq_task_attempts_old
where task_id in (select id from cairnq_tasks);
drop table cairnq_task_steps_old;
drop table cairnq_task_attempts_old;
create trigger if not exists cairnq_steps_forget
    after delete on cairnq_tasks
begin
    delete from cairnq_task_steps where task_id = old.id;
    delete from cairnq_task_attempts where task_id = old.id;
end;
