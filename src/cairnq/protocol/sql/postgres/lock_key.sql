-- Serializes keyed work with a transaction-scoped advisory lock on the key's hash.
-- Returns one row, which callers ignore. A hash collision only over-serializes.
-- params: key
select pg_advisory_xact_lock(hashtextextended(:key::text, 0)) as locked;
