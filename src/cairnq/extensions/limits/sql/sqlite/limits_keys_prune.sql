-- Forgets the recorded keys of the named limits whose task is no longer running (a reference SDK worker settled or recovered it, or it was purged); the triggers of x0030 take each from its key's running count.
-- Returns (limit_name, key_value) for each key forgotten.
-- params: names
delete from cairnq_limit_keys
where limit_name in (select value from json_each(:names))
  and not exists (
      select 1 from cairnq_tasks t where t.id = cairnq_limit_keys.task_id and t.status = 'running'
  )
returning limit_name, key_value;
