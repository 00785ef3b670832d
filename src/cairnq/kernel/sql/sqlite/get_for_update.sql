-- Reads one task by id inside a write transaction (BEGIN IMMEDIATE already keeps every other writer out).
-- Returns the row, or zero rows when there is no such task.
-- params: id
select * from cairnq_tasks where id = :id;
