-- Reads a task's recorded attempts (extension table cairnq_task_attempts, x0009), in the order they ended (then by start, then attempt number).
-- Returns (claim, attempt, worker_id, started_at_ms, ended_at_ms, outcome, error) per attempt, or zero rows when none was recorded.
-- params: id
select claim, attempt, worker_id, started_at_ms, ended_at_ms, outcome, error
from cairnq_task_attempts
where task_id = :id::text
order by ended_at_ms, coalesce(started_at_ms, ended_at_ms), attempt, claim;
