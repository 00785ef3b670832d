-- Reads many tasks by id.
-- Returns one row per existing id.
-- params: ids
select * from cairnq_tasks where id = any(:ids::text[]);
