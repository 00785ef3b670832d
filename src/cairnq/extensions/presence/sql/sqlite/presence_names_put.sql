-- Records the task names a worker serves (extension table cairnq_worker_names, x0004).
-- Returns no rows.
-- params: worker_id, names
insert into cairnq_worker_names (worker_id, names)
values (:worker_id, :names)
on conflict (worker_id) do update
set names = excluded.names;
