-- Forgets up to limit send ids remembered past their expires_at_ms.
-- Returns nothing.
-- params: now_ms, limit
delete from cairnq_waits_sends
where send_id in (
    select send_id from cairnq_waits_sends where expires_at_ms <= :now_ms order by expires_at_ms limit :limit
);
