-- The batches of ids, to decide or change (BEGIN IMMEDIATE already keeps every other writer out).
-- Returns (id, state, callbacks) per batch found, in id order.
-- params: ids
select id, state, callbacks
from cairnq_batches
where id in (select value from json_each(:ids))
order by id;
