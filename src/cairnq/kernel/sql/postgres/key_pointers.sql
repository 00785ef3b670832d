-- Reads where each of many keys points: the task id and its status (status null when the task is gone); keys is a JSON array of strings.
-- Returns (key, task_id, status) per key that has a pointer; a key left out is free.
-- params: keys
select k.key, k.task_id, t.status
from cairnq_task_keys as k
left join cairnq_tasks as t on t.id = k.task_id
where k.key = any(array(select jsonb_array_elements_text(:keys::jsonb)));
