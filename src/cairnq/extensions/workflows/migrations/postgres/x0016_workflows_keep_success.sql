-- cairnq extension (not part of the reference protocol): a dependency deleted once it
-- succeeded (a purge, retention, a reference SDK's purge) stays counted succeeded for every
-- dependent still parked on it: the trigger function of x0013_workflows_forget.sql records
-- the success in cairnq_dependencies_satisfied before the rows go. A settlement that did
-- not decide its dependents (a reference SDK's worker, or a cairnq worker that had not seen
-- a parked task yet) then leaves nothing a purge can undo before the sweep decides them.
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
            'insert into %1$I.cairnq_dependencies_satisfied (task_id, depends_on_id) '
            'select d.task_id, d.depends_on_id from %1$I.cairnq_dependencies as d '
            'join gone as g on g.id = d.depends_on_id '
            'where g.status = ''succeeded'' '
            'and d.task_id in (select task_id from %1$I.cairnq_parked) '
            'and d.task_id not in (select id from gone) '
            'on conflict do nothing',
            tg_table_schema
        );
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
