-- Reads the end of the first recorded attempt (extension table cairnq_task_attempts, x0009), where the first rollup starts.
-- Returns one row (first_ended_ms), null when none is recorded.
-- params: none
select min(ended_at_ms) as first_ended_ms from cairnq_task_attempts;
