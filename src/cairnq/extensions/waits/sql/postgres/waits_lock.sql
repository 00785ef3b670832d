-- Serializes the waits and the sends of one event key until the transaction ends (a transaction-level advisory lock on the key).
-- Returns one row.
-- params: key
select pg_advisory_xact_lock(hashtextextended('cairnq_waits:' || :key::text, 0)) is null as locked;
