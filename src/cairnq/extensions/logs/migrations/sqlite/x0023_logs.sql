-- cairnq extension (not part of the reference protocol): what a handler logged in each
-- attempt (ctx.log, and the standard logging records capture_logging routes there), one
-- row per attempt, keyed like cairnq_task_attempts by the claim's nonce. lines is a JSON
-- array of [at_ms, level, message, source], capped per attempt; dropped counts the lines
-- past the cap. No foreign key to cairnq_tasks: a task's rows go with it (trigger).
-- Reference SDKs ignore the table: their handlers have no ctx.log.
create table if not exists cairnq_task_logs (
    task_id text not null,
    claim integer not null,
    attempt integer not null,
    lines text not null check (json_valid(lines)),
    dropped integer not null default 0,
    recorded_at_ms integer not null,
    primary key (task_id, claim)
);
create trigger if not exists cairnq_logs_forget
    after delete on cairnq_tasks
begin
    delete from cairnq_task_logs where task_id = old.id;
end;
