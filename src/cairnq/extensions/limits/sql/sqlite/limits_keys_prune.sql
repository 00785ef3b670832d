-- Drops the recorded keys of tasks no longer running (they count for nothing).
-- Returns nothing.
-- params: names
delete from cairnq_limit_keys
where limit_name in (select value from json_each(:names))
  and not exists (
      select 1 from cairnq_tasks t where t.id = cairnq_limit_keys.task_id and t.status = 'running'
  );
