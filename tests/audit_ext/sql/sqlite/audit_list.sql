-- audit_ext/sql/sqlite/audit_list.sql
select task_id, attempt, outcome, worker_id, at_ms
from cairnq_audit_log
where :task_id is null or task_id = :task_id
order by at_ms desc, rowid desc
limit :limit;
