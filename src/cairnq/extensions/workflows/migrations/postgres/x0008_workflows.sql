-- cairnq extension (not part of the reference protocol): workflows.
-- cairnq_dependencies holds the edges of task graphs: task_id runs after depends_on_id
-- ended, and policy says what happens to it when that dependency ends failed or canceled
-- ('cancel' it, 'fail' it, or 'run' it anyway). depends_on_id has no foreign key: a
-- dependency may be purged before its dependents are, which counts as ended, not succeeded.
-- cairnq_parked holds the tasks waiting on dependencies (reason 'dependencies') or on
-- children a handler gathers (reason 'gather'). A parked task is queued with run_at_ms at
-- 9999-12-31T00:00:00Z, so no worker claims it (a reference SDK's included); delay_ms is
-- the delay it was submitted with, applied from the moment it is released. Both tables'
-- rows go with their task.
create table if not exists cairnq_dependencies (
    task_id text not null references cairnq_tasks (id) on delete cascade,
    depends_on_id text not null,
    policy text not null check (policy in ('cancel', 'fail', 'run')),
    primary key (task_id, depends_on_id)
);
create index if not exists cairnq_dependencies_depends_on_idx
    on cairnq_dependencies (depends_on_id);
create table if not exists cairnq_parked (
    task_id text primary key references cairnq_tasks (id) on delete cascade,
    reason text not null check (reason in ('dependencies', 'gather')),
    delay_ms bigint not null,
    parked_at_ms bigint not null
);
