-- Marks a one-receiver event taken by a task (fanout events are never taken).
-- Returns the updated row (seq), or zero rows when it was taken already or is a fanout one.
-- params: seq, id, now_ms
update cairnq_waits_mailbox
set taken_by = :id::text, taken_at_ms = :now_ms::bigint
where seq = :seq::bigint and not fanout and taken_by is null
returning seq;
