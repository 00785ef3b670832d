-- Serialize migrators: held until the migration's transaction ends.
-- Returns nothing.
-- params: none
lock table cairnq_migrations in exclusive mode
