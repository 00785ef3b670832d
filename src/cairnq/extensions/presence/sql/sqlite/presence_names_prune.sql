-- Deletes the names of workers whose cairnq_workers row is gone (pruned, or a crash before the delete).
-- Returns no rows.
-- params: none
delete from cairnq_worker_names
where not exists (select 1 from cairnq_workers w where w.worker_id = cairnq_worker_names.worker_id);
