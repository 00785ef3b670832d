-- Marks a closed batch done (its callbacks are submitted in the same transaction): a batch is done once, ever.
-- Returns (id) once if it was closed, else nothing.
-- params: id, now_ms
update cairnq_batches
set state = 'done',
    done_at_ms = coalesce(:now_ms::bigint, floor(extract(epoch from clock_timestamp()) * 1000)::bigint)
where id = :id and state = 'closed'
returning id;
