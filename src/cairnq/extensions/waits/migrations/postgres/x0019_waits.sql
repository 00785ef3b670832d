-- cairnq extension (not part of the reference protocol): durable waits (ctx.wait_for,
-- ctx.sleep) and the event mailbox (cq.events.send).
-- cairnq_waits: one row per wait of a task's run, keyed by the wait's name in the run;
-- no foreign key to cairnq_tasks, its rows go with their task through triggers (a
-- delete and a truncate).
-- cairnq_waits_mailbox: the events sent, each kept until its expires_at_ms (swept by
-- the sends themselves); seq orders them.
create table if not exists cairnq_waits (
    task_id text not null,
    name text not null,
    kind text not null,
    event_key text,
    state text not null,
    wake_at_ms bigint,
    parked_run_at_ms bigint not null,
    message_seq bigint,
    payload text,
    created_at_ms bigint not null,
    ended_at_ms bigint,
    primary key (task_id, name)
);
create index if not exists cairnq_waits_waiting
    on cairnq_waits (event_key, created_at_ms) where state = 'waiting';
create table if not exists cairnq_waits_mailbox (
    seq bigint generated always as identity primary key,
    event_key text not null,
    task_id text,
    fanout boolean not null,
    payload text not null,
    sent_at_ms bigint not null,
    expires_at_ms bigint not null,
    taken_by text,
    taken_at_ms bigint
);
create index if not exists cairnq_waits_mailbox_key on cairnq_waits_mailbox (event_key, seq);
create index if not exists cairnq_waits_mailbox_expiry on cairnq_waits_mailbox (expires_at_ms);
create or replace function cairnq_waits_forget() returns trigger
    language plpgsql
    set search_path = pg_catalog
as $$
begin
    if tg_op = 'TRUNCATE' then
        execute format('truncate %I.cairnq_waits', tg_table_schema);
    else
        execute format(
            'delete from %I.cairnq_waits where task_id in (select id from gone)',
            tg_table_schema
        );
    end if;
    return null;
end;
$$;
drop trigger if exists cairnq_waits_forget on cairnq_tasks;
create trigger cairnq_waits_forget
    after delete on cairnq_tasks
    referencing old table as gone
    for each statement
    execute function cairnq_waits_forget();
drop trigger if exists cairnq_waits_forget_all on cairnq_tasks;
create trigger cairnq_waits_forget_all
    after truncate on cairnq_tasks
    for each statement
    execute function cairnq_waits_forget();
