-- Records a step's result for an owned attempt (extension table cairnq_task_steps, x0009); a name recorded already is left as it is. The task's row is share-locked, so recovery cannot move it meanwhile.
-- Returns (name, seq, result, attempt, recorded_at_ms) of the new record, or zero rows when the caller no longer owns the attempt (lost lease).
-- params: id, attempt, worker_id, now_ms, name, seq, result
with clock as materialized (
    select coalesce(:now_ms::bigint, floor(extract(epoch from clock_timestamp()) * 1000)::bigint) as now_ms
),
owned as materialized (
    select id
    from cairnq_tasks
    where id = :id::text and status = 'running' and worker_id = :worker_id::text
      and attempt = :attempt::integer and lease_until_ms > (select now_ms from clock)
    for share
)
insert into cairnq_task_steps (task_id, name, seq, result, attempt, recorded_at_ms)
select id, :name::text, :seq::integer, :result::jsonb, :attempt::integer, (select now_ms from clock)
from owned
on conflict (task_id, name) do nothing
returning name, seq, result, attempt, recorded_at_ms;
