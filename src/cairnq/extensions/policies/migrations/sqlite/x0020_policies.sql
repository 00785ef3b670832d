-- cairnq extension (not part of the reference protocol): the policies one submit gave a
-- task (run timeout, expiry, retry), and why a task the policies ended ended (reason).
-- No foreign key to cairnq_tasks: a task's row goes with it through a trigger.
create table if not exists cairnq_policies_tasks (
    task_id text primary key,
    expires_at_ms integer,
    started_at_ms integer,
    run_timeout_ms integer,
    retry text check (retry is null or json_valid(retry)),
    reason text,
    created_at_ms integer not null
);
create index if not exists cairnq_policies_tasks_expiry
    on cairnq_policies_tasks (expires_at_ms) where expires_at_ms is not null and reason is null;
create trigger if not exists cairnq_policies_forget
    after delete on cairnq_tasks
begin
    delete from cairnq_policies_tasks where task_id = old.id;
end;
-- One row once any submit stored a policy: from since_ms on, cairnq workers look up
-- the policies of what they claim (before that, the first such tasks wait for it).
create table if not exists cairnq_policies_use (
    name text primary key,
    since_ms integer not null
);
