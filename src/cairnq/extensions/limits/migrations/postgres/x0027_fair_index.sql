-- cairnq extension (not part of the reference protocol): the fair share's insert trigger
-- function (x0022) again, with its queries written for the schema it is created in, so
-- plpgsql plans them once per session instead of once per insert statement: a submit to
-- a database that shares no queue pays one planned read of cairnq_fair_shares. On a table
-- in another schema (a schema renamed since) it runs them as before, by name.
do $migration$
begin
    execute replace(replace($function$
create or replace function cairnq_fair_index() returns trigger
    language plpgsql
    set search_path = pg_catalog
as $body$
declare
    shared boolean;
begin
    if tg_table_schema = @literal@ then
        if not exists (select 1 from @schema@.cairnq_fair_shares) then
            return null;
        end if;
        -- The key text as limits.key_text gives it (limits_claim_keyed.sql): a non-empty
        -- string as it is, an integer as its digits; a task without such a key, or with
        -- one over 1000 bytes, is not shared.
        insert into @schema@.cairnq_fair_tasks (task_id, queue, key_value, priority, run_at_ms)
        select a.id, a.queue, k.value, a.priority, a.run_at_ms
        from added a
        join @schema@.cairnq_fair_shares s on s.queue = a.queue
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
        on conflict (task_id) do nothing;
        return null;
    end if;
    -- Another schema (renamed since this function was made): the same, by name.
    execute format('select exists (select 1 from %I.cairnq_fair_shares)', tg_table_schema)
        into shared;
    if not shared then
        return null;
    end if;
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
$body$
$function$, '@schema@', quote_ident(current_schema())), '@literal@', quote_literal(current_schema()));
end
$migration$;
