-- Whether any running task's lease has expired (any queue, any name): a read, so idle checks take no lock.
-- Returns one row with has_expired true or false.
-- params: now_ms
select exists (
    select 1 from cairnq_tasks
    where status = 'running' and lease_until_ms is not null
      and lease_until_ms <= (select coalesce(:now_ms::bigint, floor(extract(epoch from clock_timestamp()) * 1000)::bigint))
) as has_expired
