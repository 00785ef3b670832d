-- Reads a task's recorded steps (extension table cairnq_task_steps, x0009), in the order they ran.
-- Returns (name, seq, result, attempt, recorded_at_ms) per step, or zero rows when none was recorded.
-- params: id
select name, seq, result, attempt, recorded_at_ms
from cairnq_task_steps
where task_id = :id::text
order by seq, name;
