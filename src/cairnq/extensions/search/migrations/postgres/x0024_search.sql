-- cairnq extension (not part of the reference protocol): tags and declared search fields.
-- One row per (field, value, task): a tag is the field '#' (field names a client
-- declares are identifiers, so none is '#'). Searches read it by (field, value), newest
-- task id first. No foreign key to cairnq_tasks: a task's rows go with it, on a delete
-- and on a truncate (triggers).
create table if not exists cairnq_search_terms (
    field text not null,
    value text not null,
    task_id text not null,
    primary key (field, value, task_id)
);
create index if not exists cairnq_search_terms_task on cairnq_search_terms (task_id);
create or replace function cairnq_search_forget() returns trigger
    language plpgsql
    set search_path = pg_catalog
as $$
begin
    if tg_op = 'TRUNCATE' then
        execute format('truncate %I.cairnq_search_terms', tg_table_schema);
    else
        execute format(
            'delete from %I.cairnq_search_terms where task_id in (select id from gone)',
            tg_table_schema
        );
    end if;
    return null;
end;
$$;
drop trigger if exists cairnq_search_forget on cairnq_tasks;
create trigger cairnq_search_forget
    after delete on cairnq_tasks
    referencing old table as gone
    for each statement
    execute function cairnq_search_forget();
drop trigger if exists cairnq_search_forget_all on cairnq_tasks;
create trigger cairnq_search_forget_all
    after truncate on cairnq_tasks
    for each statement
    execute function cairnq_search_forget();
