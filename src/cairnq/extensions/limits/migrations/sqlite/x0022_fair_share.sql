-- cairnq extension (not part of the reference protocol): fair share of a queue's workers
-- among the values of a key (tenants). cairnq_fair_shares holds each shared queue with its
-- key path and weights; cairnq_fair_tasks holds every task of a shared queue with its key,
-- written by a trigger on insert (whoever submits: a cairnq client or a reference SDK), so
-- a claim can walk the distinct keys and take the first tasks of each (index
-- cairnq_fair_tasks_walk) instead of the head of the queue. A row of a task that ended is
-- pruned by fair claims; a row goes with its task through a trigger.
-- Reference SDKs ignore both tables; their workers claim shared tasks in queue order.
create table if not exists cairnq_fair_shares (
    queue text primary key,
    key_root text not null check (key_root in ('payload', 'metadata')),
    key_path text not null,
    weights text not null default '{}' check (json_valid(weights)),
    updated_at_ms integer not null
);
create table if not exists cairnq_fair_tasks (
    task_id text primary key,
    queue text not null,
    key_value text not null,
    priority integer not null,
    run_at_ms integer not null
);
create index if not exists cairnq_fair_tasks_walk
    on cairnq_fair_tasks (queue, key_value, priority desc, run_at_ms, task_id);
create trigger if not exists cairnq_fair_index
    after insert on cairnq_tasks
    when exists (select 1 from cairnq_fair_shares where queue = new.queue)
begin
    -- The key text as limits.key_text gives it (limits_admit_keyed.sql): a non-empty
    -- string as it is, an integer as its digits; a task without such a key, or with one
    -- over 1000 bytes, is not shared.
    insert or ignore into cairnq_fair_tasks (task_id, queue, key_value, priority, run_at_ms)
    select new.id, new.queue, k.value, new.priority, new.run_at_ms
    from (
        select case when json_valid(found.doc) then (
            case json_type(found.doc, found.path)
                when 'text' then nullif(json_extract(found.doc, found.path), '')
                -- Past 64 bits json_extract gives a float: the two-path form gives the
                -- JSON text [n,n], whose n is the integer as written.
                when 'integer' then (
                    select case when digits = '-0' then '0' else digits end
                    from (
                        select substr(pair, 2, instr(pair, ',') - 2) as digits
                        from (select json_extract(found.doc, found.path, found.path) as pair)
                    )
                )
            end
        ) end as value
        from (
            select s.key_path as path,
                case when s.key_root = 'metadata' then new.metadata else new.payload end as doc
            from cairnq_fair_shares s
            where s.queue = new.queue
        ) as found
    ) as k
    where k.value is not null and length(cast(k.value as blob)) <= 1000;
end;
create trigger if not exists cairnq_fair_forget
    after delete on cairnq_tasks
begin
    delete from cairnq_fair_tasks where task_id = old.id;
end;
