-- Settles many owned attempts at once, as complete does each: succeeded with its result, or canceled (result kept) when a cancel was requested.
-- Returns (id, status, queue) per settled row; an id left out was not owned any more (lost lease).
-- params: ids, attempts, lease_tokens, results, worker_id, now_ms
with clock as materialized (
    select coalesce(:now_ms::bigint, floor(extract(epoch from clock_timestamp()) * 1000)::bigint) as now_ms
),
owned as materialized (
    select t.id
    from cairnq_tasks as t
    join unnest(:ids::text[], :attempts::integer[]) as s (id, attempt)
      on s.id = t.id and s.attempt = t.attempt
    where t.status = 'running'
      and t.worker_id = :worker_id::text
      and t.lease_until_ms > (select now_ms from clock)
    for update of t
),
fenced as materialized (
    select l.task_id
    from cairnq_leases as l
    join unnest(:ids::text[], :lease_tokens::bigint[]) as k (id, token)
      on k.id = l.task_id and k.token = l.token
    where l.task_id in (select id from owned)
    for share of l
)
update cairnq_tasks as t
set status = case when t.cancel_requested_at_ms is null then 'succeeded' else 'canceled' end,
    result = case when t.cancel_requested_at_ms is null then s.new_result::jsonb else t.result end,
    progress = case when t.cancel_requested_at_ms is null then 1.0 else t.progress end,
    lease_until_ms = null,
    completed_at_ms = clock.now_ms,
    updated_at_ms = clock.now_ms
from unnest(:ids::text[], :results::text[]) as s (id, new_result),
     clock
where t.id = s.id
  and t.id in (select task_id from fenced)
returning t.id, t.status, t.queue;
