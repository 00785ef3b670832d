-- cairnq extension (not part of the reference protocol): satisfied dependencies.
-- cairnq_dependencies_satisfied holds the dependency edges whose dependency was seen
-- succeeded while their dependent was still parked: written when a dependent is decided
-- and left waiting (by the settlement that ended the dependency, the dependent's
-- submission or the workflow sweep). Deciding a parked task counts such an edge as
-- succeeded even once retention purged the dependency, so a purge (a reference SDK's
-- included) cannot turn a success into a missing dependency. Rows go with their edge.
create table if not exists cairnq_dependencies_satisfied (
    task_id text not null,
    depends_on_id text not null,
    primary key (task_id, depends_on_id),
    foreign key (task_id, depends_on_id)
        references cairnq_dependencies (task_id, depends_on_id) on delete cascade
);
-- The edges of tasks parked now whose dependency already succeeded.
insert into cairnq_dependencies_satisfied (task_id, depends_on_id)
select d.task_id, d.depends_on_id
from cairnq_dependencies as d
join cairnq_parked as p on p.task_id = d.task_id
join cairnq_tasks as x on x.id = d.depends_on_id
where x.status = 'succeeded'
on conflict (task_id, depends_on_id) do nothing;
