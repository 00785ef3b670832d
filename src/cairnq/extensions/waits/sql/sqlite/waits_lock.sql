-- Serializes the waits and the sends of one event key until the transaction ends (SQLite's writes are serialized already).
-- Returns one row.
-- params: key
select :key as locked;
