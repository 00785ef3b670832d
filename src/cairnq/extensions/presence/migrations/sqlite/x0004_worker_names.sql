-- cairnq extension (not part of the reference protocol): the task names each cairnq worker
-- serves, one row per worker beside its cairnq_workers row (x0002), written with it and
-- deleted with it. A worker without a row here serves names nobody knows (a cairnq
-- version before x0004), so readers count it as serving every name on its queues.
-- A table of its own rather than a column: SQLite cannot add a column "if not exists",
-- and a repair applies every migration after the damaged one again.
-- Reference SDKs ignore it; their workers publish no presence at all.
create table if not exists cairnq_worker_names (
    worker_id text primary key,
    names text not null default '[]' check (json_valid(names))
);
