-- cairnq extension (not part of the reference protocol): cairnq_leases holds no foreign key
-- to cairnq_tasks, so `truncate cairnq_tasks, cairnq_task_keys` (the reference SDK's test
-- reset) works; its rows go with their task through triggers on cairnq_tasks instead: one
-- delete per deleting statement (its deleted rows as the transition table gone), and a
-- truncate with a truncate. The function names the table in the schema of the
-- cairnq_tasks that fired it (tg_table_schema), so it follows a configured or renamed
-- schema and resolves nothing through the caller's search_path.
-- Dropping a foreign key locks cairnq_tasks as well: wait at most 10 s for the locks,
-- rather than hold every claim queued behind this migration for as long as a long
-- transaction runs (the migration fails instead, and the next open tries again).
set local lock_timeout = '10s';
alter table cairnq_leases drop constraint if exists cairnq_leases_task_id_fkey;
create or replace function cairnq_leases_forget() returns trigger
    language plpgsql
    set search_path = pg_catalog
as $$
begin
    if tg_op = 'TRUNCATE' then
        execute format('truncate %I.cairnq_leases', tg_table_schema);
    else
        execute format(
            'delete from %I.cairnq_leases where task_id in (select id from gone)',
            tg_table_schema
        );
    end if;
    return null;
end;
$$;
drop trigger if exists cairnq_leases_forget on cairnq_tasks;
create trigger cairnq_leases_forget
    after delete on cairnq_tasks
    referencing old table as gone
    for each statement
    execute function cairnq_leases_forget();
drop trigger if exists cairnq_leases_forget_all on cairnq_tasks;
create trigger cairnq_leases_forget_all
    after truncate on cairnq_tasks
    for each statement
    execute function cairnq_leases_forget();
