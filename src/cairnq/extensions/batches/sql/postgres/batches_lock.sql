-- Locks the batches of ids until the transaction ends, to decide or change them: whoever decides a batch after the lock sees every member end committed before it, so the transactions ending its last two members cannot both miss the other's.
-- Returns (id, state, callbacks) per batch found, in id order.
-- params: ids
select id, state, callbacks
from cairnq_batches
where id = any(:ids::text[])
order by id
for update;
