-- Create the migration ledger if it is missing; it is not part of any migration.
-- Returns nothing.
-- params: none
create table if not exists cairnq_migrations (
    name text primary key,
    applied_at_ms bigint not null
)
