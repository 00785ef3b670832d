-- Delivers an event to a wait still waiting (a send, for a task parked by the wait).
-- Returns the updated row (task_id), or zero rows when the wait is no longer waiting.
-- params: id, name, message_seq, payload, now_ms
update cairnq_waits
set state = 'delivered', message_seq = :message_seq::bigint, payload = :payload::text,
    ended_at_ms = :now_ms::bigint
where task_id = :id::text and name = :name::text and state = 'waiting'
returning task_id;
