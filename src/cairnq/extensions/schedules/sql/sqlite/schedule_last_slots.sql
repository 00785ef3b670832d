-- Reads each schedule's latest slot decision, by schedule name, with its task's status.
-- Returns one row per schedule that has decided a slot.
-- params: limit
select s.schedule, s.slot_ms, s.through_ms, s.slots, s.outcome, s.task_id, s.recorded_at_ms,
    t.status as task_status
from cairnq_schedule_slots as s
left join cairnq_tasks as t on t.id = s.task_id
where s.slot_ms = (
    select max(x.slot_ms) from cairnq_schedule_slots as x where x.schedule = s.schedule
)
order by s.schedule
limit :limit
