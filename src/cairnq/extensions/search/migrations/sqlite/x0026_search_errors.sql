-- cairnq extension (not part of the reference protocol): the error text of failed tasks,
-- for error search. One row per task holding an error: the first 100,000 characters of
-- the error envelope's type and message (`type: message`) in cairnq_search_errors, a
-- plain table an error search scans (it holds the tasks with an error, not all tasks).
-- Written by triggers on cairnq_tasks when an update sets a task's error (a failed
-- attempt, whoever's settlement or lease recovery wrote it): a statement that sets no
-- error writes nothing. A task's row goes when its error is cleared and when the task
-- is deleted. The triggers use core SQL and json_extract only: the protocol table never
-- depends on an optional module. Tasks that already hold an error are copied in here.
create table if not exists cairnq_search_errors (
    task_id text primary key,
    text text not null
);
create trigger if not exists cairnq_search_errors_set
    after update of error on cairnq_tasks
    when new.error is not null and new.error is not old.error
begin
    delete from cairnq_search_errors where task_id = new.id;
    insert into cairnq_search_errors (task_id, text)
    values (
        new.id,
        substr(
            coalesce(json_extract(new.error, '$.type'), '') || ': '
                || coalesce(json_extract(new.error, '$.message'), ''),
            1, 100000
        )
    );
end;
create trigger if not exists cairnq_search_errors_clear
    after update of error on cairnq_tasks
    when new.error is null and old.error is not null
begin
    delete from cairnq_search_errors where task_id = new.id;
end;
create trigger if not exists cairnq_search_errors_forget
    after delete on cairnq_tasks
    when old.error is not null
begin
    delete from cairnq_search_errors where task_id = old.id;
end;
insert into cairnq_search_errors (task_id, text)
select
    id,
    substr(
        coalesce(json_extract(error, '$.type'), '') || ': '
            || coalesce(json_extract(error, '$.message'), ''),
        1, 100000
    )
from cairnq_tasks
where error is not null
  and id not in (select task_id from cairnq_search_errors);
