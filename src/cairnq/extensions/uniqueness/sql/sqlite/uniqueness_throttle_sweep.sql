-- Forgets up to 100 throttle rows whose period ended before now_ms.
-- params: now_ms
delete from cairnq_uniqueness_throttle
where rowid in (
    select rowid from cairnq_uniqueness_throttle where until_ms <= :now_ms limit 100
);
