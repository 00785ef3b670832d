-- Serialize the creation of the migration ledger: BEGIN IMMEDIATE already does on SQLite.
-- Returns one row.
-- params: none
select 1 as locked
