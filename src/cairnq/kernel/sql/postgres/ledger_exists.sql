-- Whether the migration ledger table exists in the current schema (a read, takes no lock).
-- Returns one row with present true or false.
-- params: none
select to_regclass('cairnq_migrations') is not null as present
