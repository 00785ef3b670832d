-- Reads queued tasks past their expiry that never started and no policy ended yet (cairnq_policies_tasks, x0020).
-- Returns up to limit rows (task_id), soonest expiry first.
-- params: now_ms, limit
select p.task_id
from cairnq_policies_tasks as p
join cairnq_tasks as t on t.id = p.task_id
where p.expires_at_ms is not null and p.reason is null and p.started_at_ms is null
  and p.expires_at_ms <= :now_ms
  and t.status = 'queued'
order by p.expires_at_ms
limit :limit;
