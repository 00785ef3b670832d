-- Starts the key's unique_for period now, for the task just inserted, in place of the key's earlier one.
-- Returns (until_ms), when the period ends.
-- params: key, task_id, period_ms, now_ms
insert into cairnq_uniqueness_periods (key, task_id, started_ms, until_ms)
values (:key, :task_id, :now_ms, :now_ms + :period_ms)
on conflict (key) do update
set task_id = excluded.task_id, started_ms = excluded.started_ms, until_ms = excluded.until_ms
returning until_ms;
