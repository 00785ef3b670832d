-- Every dependency edge touching the listed tasks (as dependent or as dependency), with whether the dependent is still parked.
-- Returns (task_id, depends_on_id, policy, parked) per edge.
-- params: ids
select d.task_id, d.depends_on_id, d.policy,
       exists (select 1 from cairnq_parked as p where p.task_id = d.task_id) as parked
from cairnq_dependencies as d
where d.task_id = any(:ids::text[]) or d.depends_on_id = any(:ids::text[])
order by d.task_id, d.depends_on_id;
