-- cairnq extension (not part of the reference protocol): the fair share's index follows a
-- queued task whose payload or metadata is rewritten (a debounce submit gives the key's
-- pending task the new payload, kernel statement revise_queued), so the task is shared,
-- and counted against a cap, under the key its payload gives now. SQLite codes an
-- "update of" trigger only into the statements that set one of its columns: claims and
-- settlements, which never do, pay nothing for it.
create trigger if not exists cairnq_fair_rekey
    after update of payload, metadata on cairnq_tasks
    when new.status = 'queued'
begin
    delete from cairnq_fair_tasks where task_id = new.id;
    -- The key text as limits.key_text gives it (limits_admit_keyed.sql): a non-empty
    -- string as it is, an integer as its digits; a task without such a key, or with one
    -- over 1000 bytes, is not shared.
    insert or ignore into cairnq_fair_tasks (task_id, queue, key_value, priority, run_at_ms)
    select new.id, new.queue, k.value, new.priority, new.run_at_ms
    from (
        select case when json_valid(iif(s.key_root = 'metadata', new.metadata, new.payload)) then
            case json_type(iif(s.key_root = 'metadata', new.metadata, new.payload), s.key_path)
                when 'text' then nullif(json_extract(iif(s.key_root = 'metadata', new.metadata, new.payload), s.key_path), '')
                -- An integer as SQLite holds it prints as its digits; past 64 bits json_extract
                -- gives a float, and the two-path form gives the JSON text [n,n], whose n is
                -- the integer as written.
                when 'integer' then case when typeof(json_extract(iif(s.key_root = 'metadata', new.metadata, new.payload), s.key_path)) = 'integer'
                    then cast(json_extract(iif(s.key_root = 'metadata', new.metadata, new.payload), s.key_path) as text)
                    else substr(
                        json_extract(iif(s.key_root = 'metadata', new.metadata, new.payload), s.key_path, s.key_path), 2,
                        instr(json_extract(iif(s.key_root = 'metadata', new.metadata, new.payload), s.key_path, s.key_path), ',') - 2
                    )
                end
            end
        end as value
        from cairnq_fair_shares s
        where s.queue = new.queue
    ) as k
    where k.value is not null and length(cast(k.value as blob)) <= 1000;
end;
