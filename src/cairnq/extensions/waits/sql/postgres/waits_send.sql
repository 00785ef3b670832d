-- Keeps one sent event (extension table cairnq_waits_mailbox, x0019) until expires_at_ms; taken_by is set when a wait received it at once.
-- Returns one row (seq).
-- params: key, id, fanout, payload, now_ms, expires_at_ms, taken_by
insert into cairnq_waits_mailbox (event_key, task_id, fanout, payload, sent_at_ms, expires_at_ms,
                                  taken_by, taken_at_ms)
values (:key::text, :id::text, :fanout::boolean, :payload::text, :now_ms::bigint,
        :expires_at_ms::bigint, :taken_by::text,
        case when :taken_by::text is null then null else :now_ms::bigint end)
returning seq;
