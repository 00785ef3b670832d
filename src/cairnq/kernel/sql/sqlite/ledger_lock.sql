-- Serialize migrators. On SQLite the BEGIN IMMEDIATE around the migration already does.
-- Returns one row.
-- params: none
select 1 as locked
