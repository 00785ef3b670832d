-- cairnq extension (not part of the reference protocol): hourly rollups of the attempt
-- history (cairnq_task_attempts, x0009) for the trends. cairnq_attempt_rollups holds one
-- row per hour (by attempt end time), task name and queue: the attempts that ended in it
-- per outcome, the total run time and count of the timed ones (succeeded, failed, retry
-- with a known start), and their run times as a histogram: a JSON array of counts by
-- bucket, a bucket per run time rounded down to two significant figures (0 to 99 ms, then
-- 90 a decade: 100 ms, 110 ms ... 990 ms, 1,000 ms ...). The rows are aggregates: they
-- are not task-keyed and outlive the tasks they count. cairnq_attempt_rollup_marks holds
-- one row: every hour before rolled_until_ms has been rolled up. A periodic job of the
-- history's worker part writes both; reference SDKs ignore them. The index on the
-- attempts' end lets the rollup and the trends read a recent hour without reading the
-- whole history (one more index entry per recorded attempt).
create index if not exists cairnq_task_attempts_ended_idx
    on cairnq_task_attempts (ended_at_ms);
create table if not exists cairnq_attempt_rollups (
    hour_ms integer not null,
    name text not null,
    queue text not null,
    attempts integer not null,
    succeeded integer not null,
    failed integer not null,
    retry integer not null,
    canceled integer not null,
    snoozed integer not null,
    lost integer not null,
    released integer not null,
    run_ms integer not null,
    runs integer not null,
    histogram text not null,
    primary key (hour_ms, name, queue)
);
create table if not exists cairnq_attempt_rollup_marks (
    id integer primary key check (id = 1),
    rolled_until_ms integer not null
);
