-- Remembers what a send with an id did until expires_at_ms (an expired row of the id is replaced); delivered_to is a JSON array of task ids.
-- Returns one row (send_id), or zero rows when a remembered send holds the id already (a concurrent send with it committed first).
-- params: send_id, key, address, seq, delivered_to, kept, now_ms, expires_at_ms
insert into cairnq_waits_sends (send_id, event_key, address, seq, delivered_to, kept, sent_at_ms,
                                expires_at_ms)
values (:send_id, :key, :address, :seq, :delivered_to, :kept, :now_ms, :expires_at_ms)
on conflict (send_id) do update
set event_key = excluded.event_key, address = excluded.address, seq = excluded.seq, delivered_to = excluded.delivered_to,
    kept = excluded.kept, sent_at_ms = excluded.sent_at_ms, expires_at_ms = excluded.expires_at_ms
where cairnq_waits_sends.expires_at_ms <= excluded.sent_at_ms
returning send_id;
