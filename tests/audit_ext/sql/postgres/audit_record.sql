-- audit_ext/sql/postgres/audit_record.sql
-- rows: a JSON array of [task_id, attempt, outcome, worker_id].
insert into cairnq_audit_log (task_id, attempt, outcome, worker_id, at_ms)
select r ->> 0, (r ->> 1)::integer, r ->> 2, r ->> 3,
       coalesce(:now_ms::bigint, floor(extract(epoch from clock_timestamp()) * 1000)::bigint)
from jsonb_array_elements(:rows::jsonb) as r;
