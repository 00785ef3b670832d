-- cairnq extension (not part of the reference protocol): flow control.
-- cairnq_task_snoozes counts each task's snoozes (a snooze hands the attempt back and
-- queues the task again after a delay), so max_snoozes can bound them; its rows go with
-- their task. cairnq_pauses holds the queues and task names paused across the
-- deployment: cairnq workers do not claim them while a row exists.
-- Reference SDKs ignore both tables: to their workers a snoozed task is an ordinary
-- queued task, and a pause does not exist.
create table if not exists cairnq_task_snoozes (
    task_id text primary key references cairnq_tasks (id) on delete cascade,
    count integer not null,
    last_snoozed_at_ms integer not null,
    last_delay_ms integer not null
);
create table if not exists cairnq_pauses (
    scope text not null check (scope in ('queue', 'name')),
    target text not null,
    paused_at_ms integer not null,
    paused_by text,
    primary key (scope, target)
);
