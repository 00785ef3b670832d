-- cairnq extension (not part of the reference protocol): batches of tasks with callbacks.
-- cairnq_batches holds one row per batch: its state ('open': members can be added;
-- 'closed': its callbacks are due once every member ended; 'done': they were submitted)
-- and its callbacks (JSON: each a stored submission with its task id). cairnq_batch_members
-- holds one row per member, its outcome recorded when it ends (null while it runs). No
-- foreign key to cairnq_tasks: a member's row outlives its task, so a purge cannot change
-- what the callbacks see; a member deleted before its end was recorded gets its last
-- status recorded by the trigger ('purged' if it had not ended).
create table if not exists cairnq_batches (
    id text primary key,
    state text not null,
    callbacks text not null,
    created_at_ms integer not null,
    closed_at_ms integer,
    done_at_ms integer
);
create index if not exists cairnq_batches_undone on cairnq_batches (state) where state <> 'done';
create table if not exists cairnq_batch_members (
    batch_id text not null,
    task_id text not null,
    outcome text,
    ended_at_ms integer,
    primary key (batch_id, task_id)
);
create index if not exists cairnq_batch_members_task
    on cairnq_batch_members (task_id) where outcome is null;
create index if not exists cairnq_batch_members_live
    on cairnq_batch_members (batch_id) where outcome is null;
create trigger if not exists cairnq_batches_keep_outcome
    after delete on cairnq_tasks
begin
    update cairnq_batch_members
    set outcome = case
            when old.status in ('succeeded', 'failed', 'canceled') then old.status
            else 'purged'
        end,
        ended_at_ms = cast((julianday('now') - 2440587.5) * 86400000 as integer)
    where task_id = old.id and outcome is null;
end;
