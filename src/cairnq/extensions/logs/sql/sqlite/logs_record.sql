-- Records what handlers logged in the attempts a settlement ended (extension table cairnq_task_logs, x0022); rows is a JSON array of [task_id, claim, attempt, lines (a JSON array), dropped]. A claim recorded already is left as it is.
-- Returns nothing.
-- params: rows, now_ms
insert into cairnq_task_logs (task_id, claim, attempt, lines, dropped, recorded_at_ms)
select json_extract(r.value, '$[0]'), json_extract(r.value, '$[1]'),
       json_extract(r.value, '$[2]'), json_extract(r.value, '$[3]'),
       json_extract(r.value, '$[4]'), :now_ms
from json_each(:rows) as r
where true
on conflict (task_id, claim) do nothing;
