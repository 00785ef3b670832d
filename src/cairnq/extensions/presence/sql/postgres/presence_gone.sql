-- Deletes a worker's row when it stops cleanly.
-- Returns no rows.
-- params: worker_id
delete from cairnq_workers where worker_id = :worker_id::text;
