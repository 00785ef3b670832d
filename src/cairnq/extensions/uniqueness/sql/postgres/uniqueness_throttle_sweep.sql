-- Forgets up to 100 throttle rows whose period has ended.
-- Returns nothing.
-- params: now_ms
delete from cairnq_uniqueness_throttle
where ctid in (
    select ctid from cairnq_uniqueness_throttle
    where until_ms <= coalesce(:now_ms::bigint, floor(extract(epoch from clock_timestamp()) * 1000)::bigint)
    limit 100
    for update skip locked
);
