-- Marks a closed batch done (its callbacks are submitted in the same transaction): a batch is done once, ever.
-- Returns (id) once if it was closed, else nothing.
-- params: id, now_ms
update cairnq_batches
set state = 'done', done_at_ms = :now_ms
where id = :id and state = 'closed'
returning id;
