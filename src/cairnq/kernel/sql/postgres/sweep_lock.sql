-- Take the transaction-level advisory lock named name in this schema: the one-sweeper rule when cairnq_locks (x0001) is absent.
-- Returns one row (taken): true when this transaction holds the lock until it ends, false when another transaction holds it.
-- params: name
select pg_try_advisory_xact_lock(hashtextextended(current_schema() || '/' || :name::text, 0)) as taken
