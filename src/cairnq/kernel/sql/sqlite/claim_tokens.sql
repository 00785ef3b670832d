-- Hands each just-claimed task a new lease token: one more than its last, or 1 (cairnq extension table).
-- Returns (task_id, token) per id.
-- params: ids
insert into cairnq_leases (task_id, token)
select value, 1 from json_each(:ids) where true
on conflict (task_id) do update set token = cairnq_leases.token + 1
returning task_id, token;
