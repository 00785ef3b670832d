-- Closes an open batch: no member can be added from then on.
-- Returns (id) once if it was open, else nothing.
-- params: id, now_ms
update cairnq_batches
set state = 'closed',
    closed_at_ms = coalesce(:now_ms::bigint, floor(extract(epoch from clock_timestamp()) * 1000)::bigint)
where id = :id and state = 'open'
returning id;
