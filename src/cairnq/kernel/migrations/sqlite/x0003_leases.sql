-- cairnq extension (not part of the reference protocol): the lease token of each task's
-- latest cairnq claim. Every cairnq claim raises it by one, so no two claims of a task
-- share a token, even when worker id and attempt repeat (a retry that resets the attempt,
-- two processes given one worker id); cairnq's owned writes are fenced on it.
-- Reference SDKs ignore it; their claims leave it alone and their purges cascade into it.
create table if not exists cairnq_leases (
    task_id text primary key references cairnq_tasks (id) on delete cascade,
    token integer not null
);
