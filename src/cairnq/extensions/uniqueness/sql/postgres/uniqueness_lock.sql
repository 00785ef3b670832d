-- Serializes the submits of one throttle key with a transaction-scoped advisory lock on its hash, apart from the keys' own (lock_key); a collision only over-serializes.
-- Returns one row, which callers ignore.
-- params: key
select pg_advisory_xact_lock(hashtextextended('cairnq_uniqueness:' || :key::text, 0)) as locked;
