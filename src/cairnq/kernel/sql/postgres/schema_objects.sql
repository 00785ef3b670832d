-- The tables, indexes, triggers and functions named cairnq_* in the current schema, to compare with what the ledger's migrations create.
-- Returns (kind, name) rows; kind is table, index, trigger or function.
-- params: none
select case c.relkind when 'i' then 'index' else 'table' end as kind, c.relname::text as name
from pg_catalog.pg_class as c
where c.relnamespace = current_schema()::regnamespace
    and c.relkind in ('r', 'p', 'i')
    and c.relname like 'cairnq%'
union all
select 'trigger', t.tgname::text
from pg_catalog.pg_trigger as t
join pg_catalog.pg_class as c on c.oid = t.tgrelid
where c.relnamespace = current_schema()::regnamespace
    and not t.tgisinternal
    and t.tgname like 'cairnq%'
union all
select 'function', p.proname::text
from pg_catalog.pg_proc as p
where p.pronamespace = current_schema()::regnamespace
    and p.proname like 'cairnq%'
