-- cairnq extension (not part of the reference protocol): the policies one submit gave a
-- task (run timeout, expiry, retry), and why a task the policies ended ended (reason).
-- No foreign key to cairnq_tasks: a task's row goes with it, on a delete and on a
-- truncate (triggers).
create table if not exists cairnq_policies_tasks (
    task_id text primary key,
    expires_at_ms bigint,
    started_at_ms bigint,
    run_timeout_ms bigint,
    retry jsonb,
    reason text,
    created_at_ms bigint not null
);
create index if not exists cairnq_policies_tasks_expiry
    on cairnq_policies_tasks (expires_at_ms) where expires_at_ms is not null and reason is null;
create or replace function cairnq_policies_forget() returns trigger
    language plpgsql
    set search_path = pg_catalog
as $$
begin
    if tg_op = 'TRUNCATE' then
        execute format('truncate %I.cairnq_policies_tasks', tg_table_schema);
    else
        execute format(
            'delete from %I.cairnq_policies_tasks where task_id in (select id from gone)',
            tg_table_schema
        );
    end if;
    return null;
end;
$$;
drop trigger if exists cairnq_policies_forget on cairnq_tasks;
create trigger cairnq_policies_forget
    after delete on cairnq_tasks
    referencing old table as gone
    for each statement
    execute function cairnq_policies_forget();
drop trigger if exists cairnq_policies_forget_all on cairnq_tasks;
create trigger cairnq_policies_forget_all
    after truncate on cairnq_tasks
    for each statement
    execute function cairnq_policies_forget();
-- One row once any submit stored a policy: from since_ms on, cairnq workers look up
-- the policies of what they claim (before that, the first such tasks wait for it).
create table if not exists cairnq_policies_use (
    name text primary key,
    since_ms bigint not null
);
