-- Records parked tasks (extension table cairnq_parked, x0008); rows is a JSON array of [task_id, reason, delay_ms].
-- Returns nothing.
-- params: rows, now_ms
insert into cairnq_parked (task_id, reason, delay_ms, parked_at_ms)
select json_extract(r.value, '$[0]'), json_extract(r.value, '$[1]'), json_extract(r.value, '$[2]'), :now_ms
from json_each(:rows) as r
where true
on conflict (task_id) do update
set reason = excluded.reason, delay_ms = excluded.delay_ms, parked_at_ms = excluded.parked_at_ms;
