-- The migrations the ledger records as applied, by file name.
-- Returns one row per applied migration (name, applied_at_ms).
-- params: none
select name, applied_at_ms from cairnq_migrations order by name
