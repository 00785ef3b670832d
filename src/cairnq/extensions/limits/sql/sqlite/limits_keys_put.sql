-- Records the key each just-claimed task counts against; rows is a JSON array of [task_id, limit_name, key_value].
-- Returns nothing.
-- params: rows
insert into cairnq_limit_keys (task_id, limit_name, key_value)
select json_extract(value, '$[0]'), json_extract(value, '$[1]'), json_extract(value, '$[2]')
from json_each(:rows)
where true
on conflict (task_id, limit_name) do update set key_value = excluded.key_value;
