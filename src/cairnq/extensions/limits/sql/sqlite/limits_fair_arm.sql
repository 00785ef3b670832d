-- Creates the fair share's insert trigger (none while the database has no share, see x0027_fair_index.sql), which records the key of each task inserted into a shared queue; nothing when it exists.
-- Returns nothing.
-- params: none
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
