-- NOTIFY trigger: cairnq_queued (payload: queue) when a row becomes queued,
-- cairnq_done (payload: task id) when a row first reaches a terminal status.
create or replace function cairnq_notify() returns trigger
    language plpgsql
    set search_path = pg_catalog
as $$
begin
    if new.status = 'queued'
       and (tg_op = 'INSERT' or old.status is distinct from new.status) then
        perform pg_catalog.pg_notify('cairnq_queued', new.queue);
    elsif tg_op = 'UPDATE'
          and new.status in ('succeeded', 'failed', 'canceled')
          and old.status not in ('succeeded', 'failed', 'canceled') then
        perform pg_catalog.pg_notify('cairnq_done', new.id);
    end if;
    return null;
end;
$$;

drop trigger if exists cairnq_tasks_notify on cairnq_tasks;
create trigger cairnq_tasks_notify
    after insert or update of status on cairnq_tasks
    for each row
    when (new.status is distinct from 'running')
    execute function cairnq_notify();
