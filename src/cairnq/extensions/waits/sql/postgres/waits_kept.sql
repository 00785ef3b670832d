-- The unexpired events kept for a key that a wait may still take (one-receiver ones not taken, and every fanout one), oldest first.
-- Returns (seq, task_id, fanout, payload, sent_at_ms, expires_at_ms) rows, at most limit.
-- params: key, now_ms, limit
select seq, task_id, fanout, payload, sent_at_ms, expires_at_ms
from cairnq_waits_mailbox
where event_key = :key::text and expires_at_ms > :now_ms::bigint and (fanout or taken_by is null)
order by seq
limit :limit::bigint;
