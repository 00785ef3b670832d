-- cairnq extension (not part of the reference protocol): a full-text index of error text.
-- One row per task holding an error: the error envelope's type and message (their text
-- as `type: message`) in cairnq_search_errors, indexed by the FTS5 table
-- cairnq_search_errors_fts (external content, rowid = cairnq_search_errors.id). Written
-- by triggers on cairnq_tasks when an update sets a task's error (a failed attempt,
-- whoever's settlement or lease recovery wrote it): a statement that sets no error
-- writes nothing. A task's row goes when its error is cleared and when the task is
-- deleted. Statements marked `-- needs fts5` are skipped by a sqlite3 without FTS5; the
-- search then matches error text by a scan of the tasks.
create table if not exists cairnq_search_errors (
    id integer primary key,
    task_id text not null unique,
    text text not null
);
-- needs fts5
create virtual table if not exists cairnq_search_errors_fts using fts5(
    text,
    content = 'cairnq_search_errors',
    content_rowid = 'id',
    tokenize = 'unicode61 remove_diacritics 0'
);
-- needs fts5
create trigger if not exists cairnq_search_errors_set
    after update of error on cairnq_tasks
    when new.error is not null and new.error is not old.error
begin
    insert into cairnq_search_errors_fts (cairnq_search_errors_fts, rowid, text)
    select 'delete', id, text from cairnq_search_errors where task_id = new.id;
    delete from cairnq_search_errors where task_id = new.id;
    insert into cairnq_search_errors (task_id, text)
    values (
        new.id,
        coalesce(json_extract(new.error, '$.type'), '') || ': '
            || coalesce(json_extract(new.error, '$.message'), '')
    );
    insert into cairnq_search_errors_fts (rowid, text)
    select id, text from cairnq_search_errors where task_id = new.id;
end;
-- needs fts5
create trigger if not exists cairnq_search_errors_clear
    after update of error on cairnq_tasks
    when new.error is null and old.error is not null
begin
    insert into cairnq_search_errors_fts (cairnq_search_errors_fts, rowid, text)
    select 'delete', id, text from cairnq_search_errors where task_id = new.id;
    delete from cairnq_search_errors where task_id = new.id;
end;
-- needs fts5
create trigger if not exists cairnq_search_errors_forget
    after delete on cairnq_tasks
    when old.error is not null
begin
    insert into cairnq_search_errors_fts (cairnq_search_errors_fts, rowid, text)
    select 'delete', id, text from cairnq_search_errors where task_id = old.id;
    delete from cairnq_search_errors where task_id = old.id;
end;
