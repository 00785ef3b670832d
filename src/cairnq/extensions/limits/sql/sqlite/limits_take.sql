-- Records the keys a limited claim admits; rows is a JSON array of [task_id, limit_name, key_value, rank]. The claim counted them inside the write transaction (which SQLite runs one at a time), so every one is granted; the triggers of x0030 add each to its key's count.
-- Returns (task_id, limit_name) for each task and limit recorded.
-- params: rows
insert into cairnq_limit_keys (task_id, limit_name, key_value)
select json_extract(value, '$[0]'), json_extract(value, '$[1]'), json_extract(value, '$[2]')
from json_each(:rows)
where true
on conflict (task_id, limit_name) do update set key_value = excluded.key_value
returning task_id, limit_name;
