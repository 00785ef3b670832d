-- The tables, indexes and triggers named cairnq_*, to compare with what the ledger's migrations create.
-- Returns (kind, name) rows; kind is table, index, trigger or function.
-- params: none
select type as kind, name
from sqlite_master
where type in ('table', 'index', 'trigger') and name like 'cairnq%'
