-- Members whose end is not recorded though their task ended (a reference SDK's worker, lease recovery, a worker that had not seen the batch yet) or is gone: what the sweep records.
-- Returns (task_id, status) per such member (status: the task's, 'purged' once it is gone), at most limit of them.
-- params: limit
select m.task_id, coalesce(t.status, 'purged') as status
from cairnq_batch_members as m
left join cairnq_tasks as t on t.id = m.task_id
where m.outcome is null and (t.id is null or t.status in ('succeeded', 'failed', 'canceled'))
limit :limit::bigint;
