-- Reads one task by id and locks its row until the transaction ends (a keyed submit deciding on the task its key points at).
-- Returns the row, or zero rows when there is no such task.
-- params: id
select * from cairnq_tasks where id = :id::text for update;
