-- Forgets a task's recorded steps from position :seq on (extension table cairnq_task_steps, x0009), for a replay: the steps before it, and the version row (position 0), are kept.
-- Returns the name of each step forgotten.
-- params: id, seq
delete from cairnq_task_steps
where task_id = :id and seq >= :seq and seq > 0
returning name;
