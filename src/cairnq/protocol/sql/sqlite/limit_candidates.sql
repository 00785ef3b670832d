-- One page of due queued tasks of the listed queues (and names, unless null) after the keyset cursor (after_priority, after_run_at_ms, after_id; all null for the first page).
-- Returns the task rows, in claim order.
-- params: queues, names, now_ms, after_priority, after_run_at_ms, after_id, limit
select *
from cairnq_tasks
where queue in (select value from json_each(:queues))
  and status = 'queued'
  and (:names is null or name in (select value from json_each(:names)))
  and run_at_ms <= :now_ms
  and (
      :after_id is null
      or priority < :after_priority
      or (priority = :after_priority and (
          run_at_ms > :after_run_at_ms or (run_at_ms = :after_run_at_ms and id > :after_id)
      ))
  )
order by priority desc, run_at_ms asc, id asc
limit :limit;
