-- Lists every schema that holds a cairnq_tasks table, beside the connection's current schema.
-- Returns (current_schema, schema) rows, at least one. schema is null when there is none.
-- params: none
select current_schema() as current_schema, found.nspname as schema
from (select 1) as anchor
left join (
    select n.nspname
    from pg_catalog.pg_class as c
    join pg_catalog.pg_namespace as n on n.oid = c.relnamespace
    where c.relname = 'cairnq_tasks' and c.relkind = 'r'
) as found on true
order by found.nspname;
