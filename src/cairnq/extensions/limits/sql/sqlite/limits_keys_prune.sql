-- Forgets the recorded keys of the listed counts whose task is no longer running (a reference SDK worker settled or recovered it, a gather parked it, it was purged); rows is a JSON array of [limit_name, key_value]. The triggers of x0030 take each from its key's running count; limits_counts_fix then sets the counts from the keys left.
-- Returns (limit_name, key_value) for each key forgotten.
-- params: rows
delete from cairnq_limit_keys
where exists (
    select 1 from json_each(:rows) as r
    where json_extract(r.value, '$[0]') = cairnq_limit_keys.limit_name
      and json_extract(r.value, '$[1]') = cairnq_limit_keys.key_value
  )
  and not exists (
      select 1 from cairnq_tasks t where t.id = cairnq_limit_keys.task_id and t.status = 'running'
  )
returning limit_name, key_value;
