-- Forgets up to limit events kept past their expires_at_ms.
-- Returns nothing.
-- params: now_ms, limit
delete from cairnq_waits_mailbox
where seq in (
    select seq from cairnq_waits_mailbox where expires_at_ms <= :now_ms order by expires_at_ms limit :limit
);
