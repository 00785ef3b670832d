-- The dependencies of a task, each with its policy and the dependency's row (null columns when the dependency is gone).
-- Returns one row per dependency, in dependency id order.
-- params: id
select d.depends_on_id, d.policy, t.*
from cairnq_dependencies as d
left join cairnq_tasks as t on t.id = d.depends_on_id
where d.task_id = :id
order by d.depends_on_id;
