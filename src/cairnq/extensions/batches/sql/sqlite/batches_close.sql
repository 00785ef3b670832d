-- Closes an open batch: no member can be added from then on.
-- Returns (id) once if it was open, else nothing.
-- params: id, now_ms
update cairnq_batches
set state = 'closed', closed_at_ms = :now_ms
where id = :id and state = 'open'
returning id;
