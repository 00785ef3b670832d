-- Reads the lease columns of the given tasks, taking no locks; lease_live says whether the lease is unexpired at now.
-- Returns one row per existing id. An id left out no longer exists.
-- params: ids, now_ms
select id, status, worker_id, attempt, lease_until_ms, cancel_requested_at_ms,
       (lease_until_ms is not null
        and lease_until_ms > coalesce(:now_ms::bigint, floor(extract(epoch from clock_timestamp()) * 1000)::bigint)
       ) as lease_live
from cairnq_tasks
where id = any(:ids::text[]);
