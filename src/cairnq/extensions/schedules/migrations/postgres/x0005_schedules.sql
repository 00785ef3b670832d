-- cairnq extension (not part of the reference protocol): schedules, each a cron expression
-- or an interval that submits one ordinary task per slot, and the record of every slot
-- decided. A slot belongs to at most one row of cairnq_schedule_slots (its primary key),
-- written in the transaction that submits the slot's task, and a schedule's cursor only
-- moves forward: every slot at or before it is decided. Together they make one task per
-- slot however many processes evaluate the schedule.
-- Reference SDKs ignore both tables; their workers run the tasks like any others.
create table if not exists cairnq_schedules (
    name text primary key,
    cron text,
    every_ms bigint,
    tz text not null default 'UTC',
    task_name text not null,
    queue text not null default 'default',
    payload jsonb not null default '{}'::jsonb,
    metadata jsonb not null default '{}'::jsonb,
    priority integer not null default 0,
    max_attempts integer not null default 3,
    catch_up_ms bigint not null,
    catch_up_policy text not null,
    overlap text not null,
    jitter_ms bigint not null default 0,
    paused boolean not null default false,
    source text not null,
    cursor_ms bigint not null,
    next_ms bigint,
    last_slot_ms bigint,
    last_task_id text,
    created_at_ms bigint not null,
    updated_at_ms bigint not null
);
create index if not exists cairnq_schedules_next_idx on cairnq_schedules (next_ms);
create table if not exists cairnq_schedule_slots (
    schedule text not null,
    slot_ms bigint not null,
    through_ms bigint,
    slots bigint not null default 1,
    outcome text not null,
    task_id text,
    recorded_at_ms bigint not null,
    primary key (schedule, slot_ms)
);
