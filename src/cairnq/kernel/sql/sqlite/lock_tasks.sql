-- Reads the given tasks' status inside a write transaction (BEGIN IMMEDIATE already keeps every other writer out).
-- Returns (id, status) per existing task.
-- params: ids
select id, status from cairnq_tasks where id in (select value from json_each(:ids)) order by id;
