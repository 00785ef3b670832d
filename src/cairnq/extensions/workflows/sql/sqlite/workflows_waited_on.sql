-- The tasks parked tasks wait on: the dependency of each edge of a parked task, reading at most limit parked tasks (extension table cairnq_parked, x0008) and at most limit of their edges. Every parked task has at least one edge, so a caller that gets fewer than limit edges got every edge of every parked task; one that gets limit of them knows there may be more. A settlement of a task not among them has no parked dependent to decide.
-- Returns (depends_on_id, edges) per task some edge read names, edges: how many of the edges read name it.
-- params: limit
select e.depends_on_id, count(*) as edges
from (
    -- Driven from the parked tasks, each one's edges found by the primary key (task_id
    -- first): the edges of tasks no longer parked, kept until their task is purged, are
    -- never read. A cross join keeps that order (SQLite never swaps its sides).
    select d.depends_on_id
    from (select task_id from cairnq_parked limit :limit) as p
    cross join cairnq_dependencies as d on d.task_id = p.task_id
    limit :limit
) as e
group by e.depends_on_id;
