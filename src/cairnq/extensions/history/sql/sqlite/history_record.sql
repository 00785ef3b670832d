-- Records ended attempts (extension table cairnq_task_attempts, x0009); rows is a JSON array of [task_id, claim, attempt, worker_id, started_at_ms, outcome, error text or null]. A claim recorded already is left as it is.
-- Returns nothing.
-- params: rows, now_ms
insert into cairnq_task_attempts (
    task_id, claim, attempt, worker_id, started_at_ms, ended_at_ms, outcome, error
)
select json_extract(r.value, '$[0]'), json_extract(r.value, '$[1]'),
       json_extract(r.value, '$[2]'), json_extract(r.value, '$[3]'),
       json_extract(r.value, '$[4]'), :now_ms, json_extract(r.value, '$[5]'),
       json_extract(r.value, '$[6]')
from json_each(:rows) as r
where true
on conflict (task_id, claim) do nothing;
