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
    every_ms integer,
    tz text not null default 'UTC',
    task_name text not null,
    queue text not null default 'default',
    payload text not null default '{}' check (json_valid(payload)),
    metadata text not null default '{}' check (json_valid(metadata)),
    priority integer not null default 0,
    max_attempts integer not null default 3,
    catch_up_ms integer not null,
    catch_up_policy text not null,
    overlap text not null,
    jitter_ms integer not null default 0,
    paused integer not null default 0,
    source text not null,
    cursor_ms integer not null,
    next_ms integer,
    last_slot_ms integer,
    last_task_id text,
    created_at_ms integer not null,
    updated_at_ms integer not null
);
create index if not exists cairnq_schedules_next_idx on cairnq_schedules (next_ms);
create table if not exists cairnq_schedule_slots (
    schedule text not null,
    slot_ms integer not null,
    through_ms integer,
    slots integer not null default 1,
    outcome text not null,
    task_id text,
    recorded_at_ms integer not null,
    primary key (schedule, slot_ms)
);
