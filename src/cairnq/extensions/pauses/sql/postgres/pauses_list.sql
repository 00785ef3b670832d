-- Lists every paused queue and task name (extension table cairnq_pauses, x0007).
-- Returns one row per pause (scope, target, paused_at_ms, paused_by), queues first, each scope by target.
-- params: none
select scope, target, paused_at_ms, paused_by
from cairnq_pauses
order by scope desc, target;
