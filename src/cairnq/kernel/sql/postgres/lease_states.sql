-- Reads the lease columns of the given tasks and their lease token, taking no locks; lease_live says whether the lease is unexpired at now.
-- Returns one row per existing id (lease_token null when cairnq never claimed it). An id left out no longer exists.
-- params: ids, now_ms
select t.id, t.status, t.worker_id, t.attempt, t.lease_until_ms, t.cancel_requested_at_ms,
       (t.lease_until_ms is not null
        and t.lease_until_ms > coalesce(:now_ms::bigint, floor(extract(epoch from clock_timestamp()) * 1000)::bigint)
       ) as lease_live,
       l.token as lease_token
from cairnq_tasks as t
left join cairnq_leases as l on l.task_id = t.id
where t.id = any(:ids::text[]);
