-- cairnq extension (not part of the reference protocol): durable steps and attempt history.
-- cairnq_task_steps holds the result of each step a handler finished (ctx.step), written
-- fenced on the attempt's lease, so a later attempt of the task gets it back instead of
-- running the step again. cairnq_task_attempts holds one row per ended cairnq attempt
-- (claim is the attempt's lease token, unique per claim of a task): who ran it, when,
-- how it ended and its error. Both go with their task.
-- Reference SDKs ignore both tables: their workers do not replay steps, and their
-- attempts are not recorded.
create table if not exists cairnq_task_steps (
    task_id text not null references cairnq_tasks (id) on delete cascade,
    name text not null,
    seq integer not null,
    result jsonb not null,
    attempt integer not null,
    recorded_at_ms bigint not null,
    primary key (task_id, name)
);
create table if not exists cairnq_task_attempts (
    task_id text not null references cairnq_tasks (id) on delete cascade,
    claim bigint not null,
    attempt integer not null,
    worker_id text,
    started_at_ms bigint,
    ended_at_ms bigint not null,
    outcome text not null check (
        outcome in ('succeeded', 'failed', 'retry', 'canceled', 'snoozed', 'lost', 'released')
    ),
    error jsonb,
    primary key (task_id, claim)
);
