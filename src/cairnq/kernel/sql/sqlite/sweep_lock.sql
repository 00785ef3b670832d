-- The one-sweeper rule when cairnq_locks (x0001) is absent: the write transaction this runs in already excludes every other writer.
-- Returns one row (taken, name): taken is always 1; the exclusion is the transaction's own and ends with it.
-- params: name
select 1 as taken, :name as name
