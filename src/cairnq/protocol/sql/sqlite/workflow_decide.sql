-- What deciding parked tasks needs: each one's status and, per dependency, its policy and the dependency's status (null when the dependency is gone).
-- Returns (task_id, status, depends_on_id, policy, depends_on_status) per edge of the listed parked tasks.
-- params: ids
select p.task_id, t.status, d.depends_on_id, d.policy, x.status as depends_on_status
from cairnq_parked as p
join cairnq_tasks as t on t.id = p.task_id
left join cairnq_dependencies as d on d.task_id = p.task_id
left join cairnq_tasks as x on x.id = d.depends_on_id
where p.task_id in (select value from json_each(:ids))
order by p.task_id, d.depends_on_id;
