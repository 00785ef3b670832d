-- cairnq extension (not part of the reference protocol): cairnq_limit_keys (x0006) holds no
-- foreign key to cairnq_tasks, so `truncate cairnq_tasks, cairnq_task_keys` (the reference
-- SDK's test reset) works. A row whose task is gone is harmless and needs no trigger: a
-- limit counts only the rows of running tasks (limit_running joins cairnq_tasks), and
-- limited claims prune rows of tasks not running (limit_keys_prune) now and then.
-- Dropping a foreign key locks cairnq_tasks as well: wait at most 10 s for the locks,
-- rather than hold every claim queued behind this migration for as long as a long
-- transaction runs (the migration fails instead, and the next open tries again).
set local lock_timeout = '10s';
alter table cairnq_limit_keys drop constraint if exists cairnq_limit_keys_task_id_fkey;
