-- Running tasks per limit and key, from the keys recorded at claim: for the limits keyed by a function (only a worker can compute their keys; a path-keyed limit counts with limits_running_by_path).
-- Returns (limit_name, key_value, running) for every key with a running task.
-- params: names
select k.limit_name, k.key_value, count(*) as running
from cairnq_limit_keys k
join cairnq_tasks t on t.id = k.task_id
where k.limit_name in (select value from json_each(:names))
  and t.status = 'running'
group by k.limit_name, k.key_value;
