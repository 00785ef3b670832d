-- cairnq extension (not part of the reference protocol): cairnq_dependencies and cairnq_parked
-- (x0008) hold no foreign key to cairnq_tasks, so `truncate cairnq_tasks, cairnq_task_keys`
-- (the reference SDK's test reset) works; their rows go with their task through triggers on
-- cairnq_tasks, as x0011_leases_forget.sql describes. cairnq_dependencies_satisfied (x0010)
-- keeps its foreign key to cairnq_dependencies: its rows go with their edge (the delete
-- cascades, and the truncate names it too, as PostgreSQL requires).
-- Dropping a foreign key locks cairnq_tasks as well: wait at most 10 s for the locks,
-- rather than hold every claim queued behind this migration for as long as a long
-- transaction runs (the migration fails instead, and the next open tries again).
set local lock_timeout = '10s';
alter table cairnq_dependencies drop constraint if exists cairnq_dependencies_task_id_fkey;
alter table cairnq_parked drop constraint if exists cairnq_parked_task_id_fkey;
create or replace function cairnq_workflows_forget() returns trigger
    language plpgsql
    set search_path = pg_catalog
as $$
begin
    if tg_op = 'TRUNCATE' then
        execute format(
            'truncate %1$I.cairnq_dependencies_satisfied, %1$I.cairnq_dependencies, %1$I.cairnq_parked',
            tg_table_schema
        );
    else
        execute format(
            'delete from %I.cairnq_dependencies where task_id in (select id from gone)',
            tg_table_schema
        );
        execute format(
            'delete from %I.cairnq_parked where task_id in (select id from gone)',
            tg_table_schema
        );
    end if;
    return null;
end;
$$;
drop trigger if exists cairnq_workflows_forget on cairnq_tasks;
create trigger cairnq_workflows_forget
    after delete on cairnq_tasks
    referencing old table as gone
    for each statement
    execute function cairnq_workflows_forget();
drop trigger if exists cairnq_workflows_forget_all on cairnq_tasks;
create trigger cairnq_workflows_forget_all
    after truncate on cairnq_tasks
    for each statement
    execute function cairnq_workflows_forget();
