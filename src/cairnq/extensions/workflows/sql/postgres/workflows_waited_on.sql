-- The tasks parked tasks wait on: the dependency of each edge of a parked task, reading at most limit parked tasks (extension table cairnq_parked, x0008) and at most limit of their edges. Every parked task has at least one edge, so a caller that gets fewer than limit edges got every edge of every parked task; one that gets limit of them knows there may be more. A settlement of a task not among them has no parked dependent to decide.
-- Returns (depends_on_id, edges) per task some edge read names, edges: how many of the edges read name it.
-- params: limit
select e.depends_on_id, count(*) as edges
from (
    -- Driven from the parked tasks, each one's edges found by the primary key (task_id
    -- first): the edges of tasks no longer parked, kept until their task is purged, are
    -- never read. The lateral subquery's limit keeps it from becoming a join the planner
    -- may run as a scan of every edge (as it does while its statistics say many tasks
    -- are parked, or before it has any).
    select d.depends_on_id
    from (select task_id from cairnq_parked limit :limit::bigint) as p
    cross join lateral (
        select depends_on_id
        from cairnq_dependencies
        where task_id = p.task_id
        limit :limit::bigint
    ) as d
    limit :limit::bigint
) as e
group by e.depends_on_id;
