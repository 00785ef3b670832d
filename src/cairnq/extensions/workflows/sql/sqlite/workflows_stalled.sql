-- Parked tasks that can be decided now (no dependency still queued or running, or one ended badly under policy 'cancel' or 'fail', a purged one not recorded succeeded), that are no longer queued, or with a succeeded dependency not recorded yet: what the sweep settles when the transaction that ended a dependency did not (a reference SDK's worker).
-- Returns (task_id) per such task, oldest parked first, at most limit of them.
-- params: limit
select p.task_id
from cairnq_parked as p
join cairnq_tasks as t on t.id = p.task_id
where t.status <> 'queued'
   or not exists (
        select 1 from cairnq_dependencies as d
        join cairnq_tasks as x on x.id = d.depends_on_id
        where d.task_id = p.task_id and x.status in ('queued', 'running')
    )
   or exists (
        select 1 from cairnq_dependencies as d
        left join cairnq_tasks as x on x.id = d.depends_on_id
        where d.task_id = p.task_id and d.policy in ('cancel', 'fail')
          and (x.id is null or x.status in ('failed', 'canceled'))
          and not exists (
                select 1 from cairnq_dependencies_satisfied as s
                where s.task_id = d.task_id and s.depends_on_id = d.depends_on_id
            )
    )
   or exists (
        select 1 from cairnq_dependencies as d
        join cairnq_tasks as x on x.id = d.depends_on_id
        where d.task_id = p.task_id and x.status = 'succeeded'
          and not exists (
                select 1 from cairnq_dependencies_satisfied as s
                where s.task_id = d.task_id and s.depends_on_id = d.depends_on_id
            )
    )
order by p.parked_at_ms, p.task_id
limit :limit;
