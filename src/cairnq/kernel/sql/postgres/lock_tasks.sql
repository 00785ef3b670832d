-- Locks the given tasks' rows until the transaction ends, in id order, and reads their status (submit_many deciding on the tasks its keys point at).
-- Returns (id, status) per existing task.
-- params: ids
select id, status from cairnq_tasks where id = any(:ids::text[]) order by id for update;
