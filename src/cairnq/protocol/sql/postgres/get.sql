-- Reads one task by id.
-- Returns the row, or zero rows when there is no such task.
-- params: id
select * from cairnq_tasks where id = :id::text;
