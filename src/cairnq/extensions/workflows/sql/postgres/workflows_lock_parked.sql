-- Locks the parked tasks to decide until the transaction ends: those depending on a task of ended, and those listed in candidates. Deciding after the lock reads every dependency's latest status, so two dependencies ending at once cannot both see the other running.
-- Returns (task_id, delay_ms) per parked task, in id order (delay_ms: the delay it was submitted with, due from its release).
-- params: ended, candidates
select task_id, delay_ms
from cairnq_parked
where task_id in (
        select task_id from cairnq_dependencies where depends_on_id = any(:ended::text[])
    )
   or task_id = any(:candidates::text[])
order by task_id
for update;
