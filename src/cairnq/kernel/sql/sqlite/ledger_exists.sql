-- Whether the migration ledger table exists yet (a read, so opening needs no write lock).
-- Returns one row with present = 1 or 0.
-- params: none
select exists (
    select 1 from sqlite_master where type = 'table' and name = 'cairnq_migrations'
) as present
