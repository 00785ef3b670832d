-- Drops the recorded keys of tasks no longer running (they count for nothing).
-- Returns nothing.
-- params: names
delete from cairnq_limit_keys k
where k.limit_name = any(:names::text[])
  and not exists (
      select 1 from cairnq_tasks t where t.id = k.task_id and t.status = 'running'
  );
