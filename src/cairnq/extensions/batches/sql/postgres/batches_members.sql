-- A page of a batch's members in task id order, after the task id after (null: from the start), each with its recorded outcome and its task's current status (null once purged).
-- Returns (task_id, outcome, ended_at_ms, status) per member, at most limit of them.
-- params: id, after, limit
select m.task_id, m.outcome, m.ended_at_ms, t.status
from cairnq_batch_members as m
left join cairnq_tasks as t on t.id = m.task_id
where m.batch_id = :id and (:after::text is null or m.task_id > :after::text)
order by m.task_id
limit :limit::bigint;
