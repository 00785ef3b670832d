-- cairnq extension (not part of the reference protocol): cairnq_task_snoozes (x0007) holds no
-- foreign key to cairnq_tasks, so `truncate cairnq_tasks, cairnq_task_keys` (the reference
-- SDK's test reset) works; its rows go with their task through triggers on cairnq_tasks, as
-- x0011_leases_forget.sql describes.
-- Dropping a foreign key locks cairnq_tasks as well: wait at most 10 s for the locks,
-- rather than hold every claim queued behind this migration for as long as a long
-- transaction runs (the migration fails instead, and the next open tries again).
set local lock_timeout = '10s';
alter table cairnq_task_snoozes drop constraint if exists cairnq_task_snoozes_task_id_fkey;
create or replace function cairnq_snoozes_forget() returns trigger
    language plpgsql
    set search_path = pg_catalog
as $$
begin
    if tg_op = 'TRUNCATE' then
        execute format('truncate %I.cairnq_task_snoozes', tg_table_schema);
    else
        execute format(
            'delete from %I.cairnq_task_snoozes where task_id in (select id from gone)',
            tg_table_schema
        );
    end if;
    return null;
end;
$$;
drop trigger if exists cairnq_snoozes_forget on cairnq_tasks;
create trigger cairnq_snoozes_forget
    after delete on cairnq_tasks
    referencing old table as gone
    for each statement
    execute function cairnq_snoozes_forget();
drop trigger if exists cairnq_snoozes_forget_all on cairnq_tasks;
create trigger cairnq_snoozes_forget_all
    after truncate on cairnq_tasks
    for each statement
    execute function cairnq_snoozes_forget();
