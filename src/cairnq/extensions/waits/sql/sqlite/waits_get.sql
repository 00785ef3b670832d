-- Reads one wait of a task's run (extension table cairnq_waits, x0019).
-- Returns one row (kind, event_key, state, wake_at_ms, parked_run_at_ms, message_seq, payload, created_at_ms, ended_at_ms), or zero rows when the run never began it.
-- params: id, name
select kind, event_key, state, wake_at_ms, parked_run_at_ms, message_seq, payload,
       created_at_ms, ended_at_ms
from cairnq_waits
where task_id = :id and name = :name;
