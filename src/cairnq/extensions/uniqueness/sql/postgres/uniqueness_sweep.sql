-- Forgets up to 100 unique_for periods that have ended.
-- Returns nothing.
-- params: now_ms
delete from cairnq_uniqueness_periods
where key in (
    select key from cairnq_uniqueness_periods
    where until_ms <= coalesce(:now_ms::bigint, floor(extract(epoch from clock_timestamp()) * 1000)::bigint)
    limit 100
    for update skip locked
);
