-- Reads the status of one task.
-- Returns (id, status), or zero rows when there is no such task.
-- params: id
select id, status from cairnq_tasks where id = :id::text;
