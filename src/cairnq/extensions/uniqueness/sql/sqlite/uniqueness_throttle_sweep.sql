-- Forgets up to 100 throttle rows whose period has ended.
-- Returns nothing.
-- params: now_ms
delete from cairnq_uniqueness_throttle
where rowid in (
    select rowid from cairnq_uniqueness_throttle where until_ms <= :now_ms limit 100
);
