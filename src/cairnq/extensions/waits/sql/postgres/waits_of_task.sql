-- The waits of a task's runs, in the order they began.
-- Returns (name, kind, event_key, state, wake_at_ms, parked_run_at_ms, message_seq, payload, created_at_ms, ended_at_ms) rows.
-- params: id
select name, kind, event_key, state, wake_at_ms, parked_run_at_ms, message_seq, payload,
       created_at_ms, ended_at_ms
from cairnq_waits
where task_id = :id::text
order by created_at_ms, name;
