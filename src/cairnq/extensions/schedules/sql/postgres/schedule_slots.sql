-- Reads a schedule's most recent slot decisions, newest first, with each task's status.
-- Returns one row per decision.
-- params: name, limit
select s.schedule, s.slot_ms, s.through_ms, s.slots, s.outcome, s.task_id, s.recorded_at_ms,
    t.status as task_status
from cairnq_schedule_slots as s
left join cairnq_tasks as t on t.id = s.task_id
where s.schedule = :name::text
order by s.slot_ms desc
limit :limit::integer
