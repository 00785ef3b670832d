-- cairnq extension (not part of the reference protocol): uniqueness over time and throttle.
-- cairnq_uniqueness_periods holds, per key, the task a submit(unique_for=...) inserted and
-- when its period ends: until then no other submit(unique_for=...) of the key inserts a
-- task, even once that task is purged. cairnq_uniqueness_throttle holds one row per task a
-- submit(throttle=...) inserted, for the throttle's period. Neither refers to cairnq_tasks:
-- their rows outlive the tasks on purpose, and submits sweep those whose period ended.
-- Reference SDKs ignore both tables.
create table if not exists cairnq_uniqueness_periods (
    key text primary key,
    task_id text not null,
    started_ms bigint not null,
    until_ms bigint not null
);
create index if not exists cairnq_uniqueness_periods_until
    on cairnq_uniqueness_periods (until_ms);
create table if not exists cairnq_uniqueness_throttle (
    key text not null,
    task_id text not null,
    at_ms bigint not null,
    until_ms bigint not null,
    primary key (key, task_id)
);
create index if not exists cairnq_uniqueness_throttle_until
    on cairnq_uniqueness_throttle (until_ms);
