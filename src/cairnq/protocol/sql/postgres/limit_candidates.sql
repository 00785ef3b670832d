-- One page of due queued tasks of the listed queues (and names, unless null) after the keyset cursor (after_priority, after_run_at_ms, after_id; all null for the first page); locks the rows it returns, skipping rows locked elsewhere.
-- Returns the task rows, in claim order.
-- params: queues, names, now_ms, after_priority, after_run_at_ms, after_id, limit
select *
from cairnq_tasks
where queue = any(:queues::text[])
  and status = 'queued'
  and (:names::text[] is null or name = any(:names::text[]))
  and run_at_ms <= :now_ms::bigint
  and (
      :after_id::text is null
      or priority < :after_priority::integer
      or (priority = :after_priority::integer and (
          run_at_ms > :after_run_at_ms::bigint
          or (run_at_ms = :after_run_at_ms::bigint and id > :after_id::text)
      ))
  )
order by priority desc, run_at_ms asc, id asc
limit :limit::bigint
for update skip locked;
