-- Serialize the creation of the migration ledger between processes (until commit).
-- Returns one row.
-- params: none
select pg_advisory_xact_lock(hashtextextended('cairnq_migrations', 0)) as locked
