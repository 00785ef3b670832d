-- cairnq extension (not part of the reference protocol): durable waits (ctx.wait_for,
-- ctx.sleep) and the event mailbox (cq.events.send).
-- cairnq_waits: one row per wait of a task's run, keyed by the wait's name in the run;
-- no foreign key to cairnq_tasks, its rows go with their task through a trigger.
-- cairnq_waits_mailbox: the events sent, each kept until its expires_at_ms (swept by
-- the sends themselves); seq orders them.
create table if not exists cairnq_waits (
    task_id text not null,
    name text not null,
    kind text not null,
    event_key text,
    state text not null,
    wake_at_ms integer,
    parked_run_at_ms integer not null,
    message_seq integer,
    payload text,
    created_at_ms integer not null,
    ended_at_ms integer,
    primary key (task_id, name)
);
create index if not exists cairnq_waits_waiting
    on cairnq_waits (event_key, created_at_ms) where state = 'waiting';
create table if not exists cairnq_waits_mailbox (
    seq integer primary key autoincrement,
    event_key text not null,
    task_id text,
    fanout integer not null,
    payload text not null,
    sent_at_ms integer not null,
    expires_at_ms integer not null,
    taken_by text,
    taken_at_ms integer
);
create index if not exists cairnq_waits_mailbox_key on cairnq_waits_mailbox (event_key, seq);
create index if not exists cairnq_waits_mailbox_expiry on cairnq_waits_mailbox (expires_at_ms);
create trigger if not exists cairnq_waits_forget
    after delete on cairnq_tasks
begin
    delete from cairnq_waits where task_id = old.id;
end;
