-- What deciding parked tasks needs: each one's status and, per dependency, its policy, the dependency's status (null when the dependency is gone) and whether the dependency was recorded succeeded (x0010).
-- Returns (task_id, status, depends_on_id, policy, depends_on_status, satisfied) per edge of the listed parked tasks.
-- params: ids
select p.task_id, t.status, d.depends_on_id, d.policy, x.status as depends_on_status,
       s.task_id is not null as satisfied
from cairnq_parked as p
join cairnq_tasks as t on t.id = p.task_id
left join cairnq_dependencies as d on d.task_id = p.task_id
left join cairnq_tasks as x on x.id = d.depends_on_id
left join cairnq_dependencies_satisfied as s
    on s.task_id = d.task_id and s.depends_on_id = d.depends_on_id
where p.task_id = any(:ids::text[])
order by p.task_id, d.depends_on_id;
