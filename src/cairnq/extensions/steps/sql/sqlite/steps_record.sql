-- Records a step's result for an owned attempt (extension table cairnq_task_steps, x0009); a name recorded already is left as it is.
-- Returns (name, seq, result, attempt, recorded_at_ms) of the new record, or zero rows when the caller no longer owns the attempt (lost lease).
-- params: id, attempt, worker_id, now_ms, name, seq, result
insert into cairnq_task_steps (task_id, name, seq, result, attempt, recorded_at_ms)
select :id, :name, :seq, :result, :attempt, :now_ms
where exists (
    select 1 from cairnq_tasks
    where id = :id and status = 'running' and worker_id = :worker_id
      and attempt = :attempt and lease_until_ms > :now_ms
)
on conflict (task_id, name) do nothing
returning name, seq, result, attempt, recorded_at_ms;
