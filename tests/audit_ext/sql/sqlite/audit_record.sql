-- audit_ext/sql/sqlite/audit_record.sql
-- rows: a JSON array of [task_id, attempt, outcome, worker_id].
insert into cairnq_audit_log (task_id, attempt, outcome, worker_id, at_ms)
select json_extract(r.value, '$[0]'), json_extract(r.value, '$[1]'),
       json_extract(r.value, '$[2]'), json_extract(r.value, '$[3]'), :now_ms
from json_each(:rows) as r;
