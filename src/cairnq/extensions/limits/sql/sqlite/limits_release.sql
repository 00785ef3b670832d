-- Forgets the recorded keys of the listed tasks (their attempts ended: settled, handed back or recovered); the triggers of x0030 take each from its key's running count.
-- Returns nothing.
-- params: ids
delete from cairnq_limit_keys
where task_id in (select value from json_each(:ids));
