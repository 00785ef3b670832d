-- cairnq extension (not part of the reference protocol): fair share of a queue's workers
-- among the values of a key (tenants). cairnq_fair_shares holds each shared queue with its
-- key path and weights; cairnq_fair_tasks holds every task of a shared queue with its key,
-- written by a trigger on insert (whoever submits: a cairnq client or a reference SDK), so
-- a claim can walk the distinct keys and take the first tasks of each (index
-- cairnq_fair_tasks_walk) instead of the head of the queue. A row of a task that ended is
-- pruned by fair claims; a row goes with its task on a delete and on a truncate (triggers).
-- Reference SDKs ignore both tables; their workers claim shared tasks in queue order.
create table if not exists cairnq_fair_shares (
    queue text primary key,
    key_root text not null check (key_root in ('payload', 'metadata')),
    key_path text not null,
    weights jsonb not null default '{}'::jsonb,
    updated_at_ms bigint not null
);
create table if not exists cairnq_fair_tasks (
    task_id text primary key,
    queue text not null,
    key_value text not null,
    priority integer not null,
    run_at_ms bigint not null
);
create index if not exists cairnq_fair_tasks_walk
    on cairnq_fair_tasks (queue, key_value, priority desc, run_at_ms, task_id);
create or replace function cairnq_fair_index() returns trigger
    language plpgsql
    set search_path = pg_catalog
as $$
declare
    shared boolean;
begin
    -- Without a share on the database, a trivial read and nothing more: a submit
    -- pays for fair share only once it is used.
    execute format('select exists (select 1 from %I.cairnq_fair_shares)', tg_table_schema)
        into shared;
    if not shared then
        return null;
    end if;
    -- The key text as limits.key_text gives it (limits_claim_keyed.sql): a non-empty
    -- string as it is, an integer as its digits; a task without such a key, or with one
    -- over 1000 bytes, is not shared.
    execute format(
        $q$
        insert into %1$I.cairnq_fair_tasks (task_id, queue, key_value, priority, run_at_ms)
        select a.id, a.queue, k.value, a.priority, a.run_at_ms
        from added a
        join %1$I.cairnq_fair_shares s on s.queue = a.queue
        cross join lateral (
            select case jsonb_typeof(found.value)
                when 'string' then nullif(found.value #>> '{}', '')
                when 'number' then case
                    when found.value::text ~ '^-?[0-9]+$' then found.value::text
                end
            end as value
            from (
                select jsonb_path_query_first(
                    case when s.key_root = 'metadata' then a.metadata else a.payload end,
                    ('strict ' || s.key_path)::jsonpath,
                    '{}'::jsonb,
                    true
                ) as value
            ) as found
        ) as k
        where k.value is not null and octet_length(k.value) <= 1000
        on conflict (task_id) do nothing
        $q$,
        tg_table_schema
    );
    return null;
end;
$$;
drop trigger if exists cairnq_fair_index on cairnq_tasks;
create trigger cairnq_fair_index
    after insert on cairnq_tasks
    referencing new table as added
    for each statement
    execute function cairnq_fair_index();
create or replace function cairnq_fair_forget() returns trigger
    language plpgsql
    set search_path = pg_catalog
as $$
begin
    if tg_op = 'TRUNCATE' then
        execute format('truncate %I.cairnq_fair_tasks', tg_table_schema);
    else
        execute format(
            'delete from %I.cairnq_fair_tasks where task_id in (select id from gone)',
            tg_table_schema
        );
    end if;
    return null;
end;
$$;
drop trigger if exists cairnq_fair_forget on cairnq_tasks;
create trigger cairnq_fair_forget
    after delete on cairnq_tasks
    referencing old table as gone
    for each statement
    execute function cairnq_fair_forget();
drop trigger if exists cairnq_fair_forget_all on cairnq_tasks;
create trigger cairnq_fair_forget_all
    after truncate on cairnq_tasks
    for each statement
    execute function cairnq_fair_forget();
