-- cairnq extension (not part of the reference protocol): a full-text index of error text.
-- One row per task holding an error: the words of the first 100,000 characters of the
-- error envelope's type and message (`type: message`, every run of characters other than
-- letters and digits read as a space; the bound keeps a tsvector under its 1 MB limit),
-- a tsvector of the 'simple' configuration (no stemming, no stop words) under a GIN
-- index. Written by a trigger on cairnq_tasks when a statement sets a task's error
-- (a failed attempt, whoever's settlement or lease recovery wrote it): a statement that
-- sets no error writes nothing. A task's row goes when its error is cleared and when
-- the task is deleted or truncated. It needs no extension (pg_trgm is not used). A
-- role that fails or deletes tasks needs the privileges on cairnq_search_errors too (the
-- triggers run as it). Tasks that already hold an error are indexed here.
create table if not exists cairnq_search_errors (
    task_id text primary key,
    words tsvector not null
);
create index if not exists cairnq_search_errors_words
    on cairnq_search_errors using gin (words);
create or replace function cairnq_search_errors_set() returns trigger
    language plpgsql
    set search_path = pg_catalog
as $$
begin
    if new.error is null then
        execute format('delete from %I.cairnq_search_errors where task_id = $1', tg_table_schema)
            using new.id;
    else
        execute format(
            'insert into %I.cairnq_search_errors (task_id, words) values ($1, $2) '
            'on conflict (task_id) do update set words = excluded.words',
            tg_table_schema
        ) using new.id, to_tsvector('simple'::regconfig, regexp_replace(
            left(
                coalesce(new.error ->> 'type', '') || ': ' || coalesce(new.error ->> 'message', ''),
                100000
            ),
            '[^[:alnum:]]+', ' ', 'g'
        ));
    end if;
    return null;
end;
$$;
drop trigger if exists cairnq_search_errors_set on cairnq_tasks;
create trigger cairnq_search_errors_set
    after update of error on cairnq_tasks
    for each row
    when (new.error is distinct from old.error)
    execute function cairnq_search_errors_set();
create or replace function cairnq_search_errors_forget() returns trigger
    language plpgsql
    set search_path = pg_catalog
as $$
begin
    if tg_op = 'TRUNCATE' then
        execute format('truncate %I.cairnq_search_errors', tg_table_schema);
    else
        execute format(
            'delete from %I.cairnq_search_errors where task_id in '
            '(select id from gone where error is not null)',
            tg_table_schema
        );
    end if;
    return null;
end;
$$;
drop trigger if exists cairnq_search_errors_forget on cairnq_tasks;
create trigger cairnq_search_errors_forget
    after delete on cairnq_tasks
    referencing old table as gone
    for each statement
    execute function cairnq_search_errors_forget();
drop trigger if exists cairnq_search_errors_forget_all on cairnq_tasks;
create trigger cairnq_search_errors_forget_all
    after truncate on cairnq_tasks
    for each statement
    execute function cairnq_search_errors_forget();
insert into cairnq_search_errors (task_id, words)
select
    id,
    to_tsvector('simple'::regconfig, regexp_replace(
        left(coalesce(error ->> 'type', '') || ': ' || coalesce(error ->> 'message', ''), 100000),
        '[^[:alnum:]]+', ' ', 'g'
    ))
from cairnq_tasks
where error is not null
on conflict (task_id) do nothing;
