-- Whether any running task's lease has expired (any queue, any name): a read, so idle checks take no lock.
-- Returns one row with has_expired 1 or 0.
-- params: now_ms
select exists (
    select 1 from cairnq_tasks
    where status = 'running' and lease_until_ms is not null and lease_until_ms <= :now_ms
) as has_expired
