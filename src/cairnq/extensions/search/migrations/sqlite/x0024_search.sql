-- cairnq extension (not part of the reference protocol): tags and declared search fields.
-- One row per (field, value, task): a tag is the field '#' (field names a client
-- declares are identifiers, so none is '#'). Searches read it by (field, value), newest
-- task id first. No foreign key to cairnq_tasks: a task's rows go with it (trigger).
create table if not exists cairnq_search_terms (
    field text not null,
    value text not null,
    task_id text not null,
    primary key (field, value, task_id)
) without rowid;
create index if not exists cairnq_search_terms_task on cairnq_search_terms (task_id);
create trigger if not exists cairnq_search_forget
    after delete on cairnq_tasks
begin
    delete from cairnq_search_terms where task_id = old.id;
end;
