-- Delivers an event to a wait still waiting (a send, for a task parked by the wait).
-- Returns the updated row (task_id), or zero rows when the wait is no longer waiting.
-- params: id, name, message_seq, payload, now_ms
update cairnq_waits
set state = 'delivered', message_seq = :message_seq, payload = :payload, ended_at_ms = :now_ms
where task_id = :id and name = :name and state = 'waiting'
returning task_id;
