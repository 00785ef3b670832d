-- Record a migration as applied, by its file name, at the given or the database time.
-- Returns nothing.
-- params: name, now_ms
insert into cairnq_migrations (name, applied_at_ms)
values (:name, coalesce(:now_ms::bigint, floor(extract(epoch from clock_timestamp()) * 1000)::bigint))
