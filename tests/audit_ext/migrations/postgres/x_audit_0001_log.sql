-- audit_ext/migrations/postgres/x_audit_0001_log.sql
-- The audit log: no foreign key to cairnq_tasks; a task's rows go with it, on a
-- delete and on a truncate (triggers).
create table if not exists cairnq_audit_log (
    task_id text not null,
    attempt integer,
    outcome text not null,
    worker_id text,
    at_ms bigint not null
);
create index if not exists cairnq_audit_log_task on cairnq_audit_log (task_id, at_ms);
create or replace function cairnq_audit_forget() returns trigger
    language plpgsql
    set search_path = pg_catalog
as $$
begin
    if tg_op = 'TRUNCATE' then
        execute format('truncate %I.cairnq_audit_log', tg_table_schema);
    else
        execute format(
            'delete from %I.cairnq_audit_log where task_id in (select id from gone)',
            tg_table_schema
        );
    end if;
    return null;
end;
$$;
drop trigger if exists cairnq_audit_forget on cairnq_tasks;
create trigger cairnq_audit_forget
    after delete on cairnq_tasks
    referencing old table as gone
    for each statement
    execute function cairnq_audit_forget();
drop trigger if exists cairnq_audit_forget_all on cairnq_tasks;
create trigger cairnq_audit_forget_all
    after truncate on cairnq_tasks
    for each statement
    execute function cairnq_audit_forget();
