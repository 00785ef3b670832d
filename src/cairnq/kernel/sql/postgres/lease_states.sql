-- Reads the lease columns of the given tasks, taking no locks; lease_live says whether the lease is unexpired at now.
-- Returns one row per existing id (worker_id as stored: a cairnq worker's claim holds its id and nonce). An id left out no longer exists.
-- params: ids, now_ms
select t.id, t.status, t.worker_id, t.attempt, t.lease_until_ms, t.cancel_requested_at_ms,
       (t.lease_until_ms is not null
        and t.lease_until_ms > coalesce(:now_ms::bigint, floor(extract(epoch from clock_timestamp()) * 1000)::bigint)
       ) as lease_live
from cairnq_tasks as t
where t.id = any(:ids::text[]);
