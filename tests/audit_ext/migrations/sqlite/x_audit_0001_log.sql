-- audit_ext/migrations/sqlite/x_audit_0001_log.sql
-- The audit log: no foreign key to cairnq_tasks; a task's rows go with it (trigger).
create table if not exists cairnq_audit_log (
    task_id text not null,
    attempt integer,
    outcome text not null,
    worker_id text,
    at_ms integer not null
);
create index if not exists cairnq_audit_log_task on cairnq_audit_log (task_id, at_ms);
create trigger if not exists cairnq_audit_forget
    after delete on cairnq_tasks
begin
    delete from cairnq_audit_log where task_id = old.id;
end;
