-- Records the key each just-claimed task counts against; rows is a JSON array of [task_id, limit_name, key_value].
-- Returns nothing.
-- params: rows
insert into cairnq_limit_keys (task_id, limit_name, key_value)
select r ->> 0, r ->> 1, r ->> 2
from jsonb_array_elements(:rows::jsonb) as r
on conflict (task_id, limit_name) do update set key_value = excluded.key_value;
