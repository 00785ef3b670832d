-- Records members of a batch; rows is a JSON array of [batch_id, task_id, outcome] (outcome null for a member that has not ended). A member already recorded stays as it is.
-- Returns nothing.
-- params: rows, now_ms
insert into cairnq_batch_members (batch_id, task_id, outcome, ended_at_ms)
select json_extract(r.value, '$[0]'), json_extract(r.value, '$[1]'), json_extract(r.value, '$[2]'),
       case when json_extract(r.value, '$[2]') is not null then :now_ms end
from json_each(:rows) as r
where true
on conflict (batch_id, task_id) do nothing;
