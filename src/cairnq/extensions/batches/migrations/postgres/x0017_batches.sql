-- cairnq extension (not part of the reference protocol): batches of tasks with callbacks.
-- cairnq_batches holds one row per batch: its state ('open': members can be added;
-- 'closed': its callbacks are due once every member ended; 'done': they were submitted)
-- and its callbacks (JSON: each a stored submission with its task id). cairnq_batch_members
-- holds one row per member, its outcome recorded when it ends (null while it runs). No
-- foreign key to cairnq_tasks: a member's row outlives its task, so a purge cannot change
-- what the callbacks see; a member deleted before its end was recorded gets its last
-- status recorded by the triggers ('purged' if it had not ended, or on a truncate).
create table if not exists cairnq_batches (
    id text primary key,
    state text not null,
    callbacks text not null,
    created_at_ms bigint not null,
    closed_at_ms bigint,
    done_at_ms bigint
);
create index if not exists cairnq_batches_undone on cairnq_batches (state) where state <> 'done';
create table if not exists cairnq_batch_members (
    batch_id text not null,
    task_id text not null,
    outcome text,
    ended_at_ms bigint,
    primary key (batch_id, task_id)
);
create index if not exists cairnq_batch_members_task
    on cairnq_batch_members (task_id) where outcome is null;
create index if not exists cairnq_batch_members_live
    on cairnq_batch_members (batch_id) where outcome is null;
create or replace function cairnq_batches_keep_outcome() returns trigger
    language plpgsql
    set search_path = pg_catalog
as $$
begin
    if tg_op = 'TRUNCATE' then
        execute format(
            'update %I.cairnq_batch_members set outcome = ''purged'', '
            'ended_at_ms = floor(extract(epoch from clock_timestamp()) * 1000)::bigint '
            'where outcome is null',
            tg_table_schema
        );
    else
        execute format(
            'update %I.cairnq_batch_members as m set outcome = case '
            'when g.status in (''succeeded'', ''failed'', ''canceled'') then g.status '
            'else ''purged'' end, '
            'ended_at_ms = floor(extract(epoch from clock_timestamp()) * 1000)::bigint '
            'from gone as g where m.task_id = g.id and m.outcome is null',
            tg_table_schema
        );
    end if;
    return null;
end;
$$;
drop trigger if exists cairnq_batches_keep_outcome on cairnq_tasks;
create trigger cairnq_batches_keep_outcome
    after delete on cairnq_tasks
    referencing old table as gone
    for each statement
    execute function cairnq_batches_keep_outcome();
drop trigger if exists cairnq_batches_keep_outcome_all on cairnq_tasks;
create trigger cairnq_batches_keep_outcome_all
    after truncate on cairnq_tasks
    for each statement
    execute function cairnq_batches_keep_outcome();
