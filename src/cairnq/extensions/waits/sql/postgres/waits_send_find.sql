-- What an earlier send with this id did (extension table cairnq_waits_sends, x0025), while it is remembered.
-- Returns one row (event_key, address, seq, delivered_to, kept), or zero rows when no remembered send has the id.
-- params: send_id, now_ms
select event_key, address, seq, delivered_to, kept
from cairnq_waits_sends
where send_id = :send_id::text and expires_at_ms > :now_ms::bigint;
