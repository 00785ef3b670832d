-- The parked tasks to decide: those depending on a task of ended, and those listed in candidates (BEGIN IMMEDIATE already keeps every other writer out).
-- Returns (task_id, delay_ms) per parked task, in id order (delay_ms: the delay it was submitted with, due from its release).
-- params: ended, candidates
select task_id, delay_ms
from cairnq_parked
where task_id in (
        select task_id from cairnq_dependencies
        where depends_on_id in (select value from json_each(:ended))
    )
   or task_id in (select value from json_each(:candidates))
order by task_id;
