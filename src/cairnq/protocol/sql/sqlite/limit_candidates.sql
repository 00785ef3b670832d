-- One page of due queued tasks of the listed queues (and names, unless null) after the keyset cursor (after_priority, after_run_at_ms, after_id; all null for the first page), leaving out tasks whose key (the JSON path key_path into key_root, payload or metadata) is among skip_keys (unless null).
-- Returns the task rows, in claim order.
-- params: queues, names, now_ms, after_priority, after_run_at_ms, after_id, key_root, key_path, skip_keys, limit
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
  and (
      :skip_keys is null
      or not exists (
          select 1 from json_each(:skip_keys) as skip
          where skip.value = cast(json_extract(
              case when :key_root = 'metadata' then metadata else payload end, :key_path
          ) as text)
      )
  )
order by priority desc, run_at_ms asc, id asc
limit :limit;
