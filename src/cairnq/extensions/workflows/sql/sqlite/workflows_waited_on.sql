-- The tasks parked tasks wait on: the dependency of each edge of a parked task, reading at most limit edges (a caller that gets limit of them knows there may be more). A settlement of a task not among them has no parked dependent to decide.
-- Returns (depends_on_id, edges) per task some edge read names, edges: how many of the edges read name it.
-- params: limit
select e.depends_on_id, count(*) as edges
from (
    select d.depends_on_id
    from cairnq_parked as p
    join cairnq_dependencies as d on d.task_id = p.task_id
    limit :limit
) as e
group by e.depends_on_id;
