-- cairnq extension (not part of the reference protocol): the fair share's index follows a
-- queued task whose payload or metadata is rewritten (a debounce submit gives the key's
-- pending task the new payload, kernel statement revise_queued), so the task is shared,
-- and counted against a cap, under the key its payload gives now. A row trigger on those
-- two columns: PostgreSQL fires it only for an update that sets one of them, which
-- claims and settlements never do. Its statements name the tables in the trigger's own
-- schema.
create or replace function cairnq_fair_rekey() returns trigger
    language plpgsql
    set search_path = pg_catalog
as $body$
begin
    execute format('delete from %I.cairnq_fair_tasks where task_id = $1', tg_table_schema)
        using new.id;
    -- The key text as limits.key_text gives it (limits_claim_keyed.sql): a non-empty
    -- string as it is, an integer as its digits; a task without such a key, or with one
    -- over 1000 bytes, is not shared.
    execute format(
        $q$
        insert into %1$I.cairnq_fair_tasks (task_id, queue, key_value, priority, run_at_ms)
        select $1, $2, k.value, $3, $4
        from %1$I.cairnq_fair_shares s
        cross join lateral (
            select case jsonb_typeof(found.value)
                when 'string' then nullif(found.value #>> '{}', '')
                when 'number' then case
                    when found.value::text ~ '^-?[0-9]+$' then found.value::text
                end
            end as value
            from (
                select jsonb_path_query_first(
                    case when s.key_root = 'metadata' then $6 else $5 end,
                    ('strict ' || s.key_path)::jsonpath,
                    '{}'::jsonb,
                    true
                ) as value
            ) as found
        ) as k
        where s.queue = $2 and k.value is not null and octet_length(k.value) <= 1000
        on conflict (task_id) do nothing
        $q$,
        tg_table_schema
    ) using new.id, new.queue, new.priority, new.run_at_ms, new.payload, new.metadata;
    return null;
end;
$body$;
drop trigger if exists cairnq_fair_rekey on cairnq_tasks;
create trigger cairnq_fair_rekey
    after update of payload, metadata on cairnq_tasks
    for each row
    when (new.status = 'queued')
    execute function cairnq_fair_rekey();
