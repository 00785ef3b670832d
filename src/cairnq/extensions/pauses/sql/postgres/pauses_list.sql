-- Lists every paused queue and task name (cairnq_pauses, x0007) but those whose end (cairnq_pause_ends, x0017) has passed.
-- Returns one row per pause (scope, target, paused_at_ms, paused_by, resume_at_ms; null: until resumed), queues first, each scope by target.
-- params: now_ms
select p.scope, p.target, p.paused_at_ms, p.paused_by, e.resume_at_ms
from cairnq_pauses p
left join cairnq_pause_ends e on e.scope = p.scope and e.target = p.target
where e.resume_at_ms is null or e.resume_at_ms > coalesce(:now_ms::bigint, floor(extract(epoch from clock_timestamp()) * 1000)::bigint)
order by p.scope desc, p.target;
