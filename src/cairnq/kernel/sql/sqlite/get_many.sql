-- Reads many tasks by id.
-- Returns one row per existing id.
-- params: ids
select * from cairnq_tasks where id in (select value from json_each(:ids));
