-- Points many keys at their tasks; rows is a JSON array of [key, task_id].
-- Returns nothing.
-- params: rows, now_ms
insert into cairnq_task_keys (key, task_id, created_at_ms, updated_at_ms)
select json_extract(value, '$[0]'), json_extract(value, '$[1]'), :now_ms, :now_ms
from json_each(:rows)
where true
on conflict (key) do update set task_id = excluded.task_id, updated_at_ms = excluded.updated_at_ms;
