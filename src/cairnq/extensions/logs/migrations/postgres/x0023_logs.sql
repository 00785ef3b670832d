-- cairnq extension (not part of the reference protocol): what a handler logged in each
-- attempt (ctx.log, and the standard logging records capture_logging routes there), one
-- row per attempt, keyed like cairnq_task_attempts by the claim's nonce. lines is a JSON
-- array of [at_ms, level, message, source], capped per attempt; dropped counts the lines
-- past the cap. No foreign key to cairnq_tasks: a task's rows go with it, on a delete
-- and on a truncate (triggers).
-- Reference SDKs ignore the table: their handlers have no ctx.log.
create table if not exists cairnq_task_logs (
    task_id text not null,
    claim bigint not null,
    attempt integer not null,
    lines text not null,
    dropped integer not null default 0,
    recorded_at_ms bigint not null,
    primary key (task_id, claim)
);
create or replace function cairnq_logs_forget() returns trigger
    language plpgsql
    set search_path = pg_catalog
as $$
begin
    if tg_op = 'TRUNCATE' then
        execute format('truncate %I.cairnq_task_logs', tg_table_schema);
    else
        execute format(
            'delete from %I.cairnq_task_logs where task_id in (select id from gone)',
            tg_table_schema
        );
    end if;
    return null;
end;
$$;
drop trigger if exists cairnq_logs_forget on cairnq_tasks;
create trigger cairnq_logs_forget
    after delete on cairnq_tasks
    referencing old table as gone
    for each statement
    execute function cairnq_logs_forget();
drop trigger if exists cairnq_logs_forget_all on cairnq_tasks;
create trigger cairnq_logs_forget_all
    after truncate on cairnq_tasks
    for each statement
    execute function cairnq_logs_forget();
