-- audit_ext/sql/postgres/audit_list.sql
select task_id, attempt, outcome, worker_id, at_ms
from cairnq_audit_log
where :task_id::text is null or task_id = :task_id
order by at_ms desc
limit :limit;
