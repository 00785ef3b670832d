-- Record a migration as applied, by its file name.
-- Returns nothing.
-- params: name, now_ms
insert into cairnq_migrations (name, applied_at_ms) values (:name, :now_ms)
