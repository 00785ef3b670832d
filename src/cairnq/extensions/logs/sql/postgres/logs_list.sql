-- Reads what a task's handlers logged, per attempt (extension table cairnq_task_logs, x0022), in the order the attempts ended.
-- Returns (claim, attempt, lines, dropped, recorded_at_ms) per attempt that logged, or zero rows.
-- params: id
select claim, attempt, lines, dropped, recorded_at_ms
from cairnq_task_logs
where task_id = :id::text
order by recorded_at_ms, claim;
