-- Deletes the names a worker served, with its cairnq_workers row.
-- Returns no rows.
-- params: worker_id
delete from cairnq_worker_names where worker_id = :worker_id;
