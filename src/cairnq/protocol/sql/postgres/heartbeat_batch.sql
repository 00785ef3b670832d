-- Extends many owned leases to now + lease_ms, where ids[i] is held at attempts[i] with lease_tokens[i]. Skips rows locked elsewhere.
-- Returns (id, cancel_requested_at_ms) per renewed row. An id left out was not renewed.
-- params: ids, attempts, lease_tokens, worker_id, now_ms, lease_ms
with clock as materialized (
    select coalesce(:now_ms::bigint, floor(extract(epoch from clock_timestamp()) * 1000)::bigint) as now_ms
),
held as materialized (
    select t.id
    from cairnq_tasks as t
    join unnest(:ids::text[], :attempts::integer[]) as p (id, attempt)
      on p.id = t.id and p.attempt = t.attempt
    where t.status = 'running'
      and t.worker_id = :worker_id::text
      and t.lease_until_ms > (select now_ms from clock)
    for update of t skip locked
),
fenced as materialized (
    select l.task_id
    from cairnq_leases as l
    join unnest(:ids::text[], :lease_tokens::bigint[]) as k (id, token)
      on k.id = l.task_id and k.token = l.token
    where l.task_id in (select id from held)
    for share of l
)
update cairnq_tasks
set lease_until_ms = (select now_ms from clock) + :lease_ms::bigint,
    updated_at_ms = (select now_ms from clock)
where id in (select task_id from fenced)
returning id, cancel_requested_at_ms;
