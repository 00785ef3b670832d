-- Serializes the submits of one throttle key: a transaction-scoped advisory lock on the
-- key's hash, apart from the keys' own (lock_key). A collision only over-serializes.
-- Returns one row, which callers ignore.
-- params: key
select pg_advisory_xact_lock(hashtextextended('cairnq_uniqueness:' || :key::text, 0)) as locked;
