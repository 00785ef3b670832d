-- One batch.
-- Returns (id, state, callbacks, created_at_ms, closed_at_ms, done_at_ms) once, or nothing.
-- params: id
select id, state, callbacks, created_at_ms, closed_at_ms, done_at_ms
from cairnq_batches
where id = :id;
