-- Drops the keys recorded for tasks of queue that ended or are gone (fair claims walk past them otherwise).
-- Returns nothing.
-- params: queue
delete from cairnq_fair_tasks f
where f.queue = :queue::text
  and not exists (
      select 1 from cairnq_tasks t
      where t.id = f.task_id and t.status in ('queued', 'running')
  );
