-- Settles many owned attempts at once, as complete does each: succeeded with its result, or canceled (result kept) when a cancel was requested.
-- Returns (id, status, queue) per settled row; an id left out was not owned any more (lost lease).
-- params: ids, attempts, results, worker_id, now_ms
with clock as materialized (
    select coalesce(:now_ms::bigint, floor(extract(epoch from clock_timestamp()) * 1000)::bigint) as now_ms
),
owned as materialized (
    select t.id, s.new_result
    from cairnq_tasks as t
    join unnest(:ids::text[], :attempts::integer[], :results::text[]) as s (id, attempt, new_result)
      on s.id = t.id and s.attempt = t.attempt
    where t.status = 'running'
      and t.worker_id = :worker_id::text
      and t.lease_until_ms > (select now_ms from clock)
    order by t.id
    for update of t
)
update cairnq_tasks as t
set status = case when t.cancel_requested_at_ms is null then 'succeeded' else 'canceled' end,
    result = case when t.cancel_requested_at_ms is null then o.new_result::jsonb else t.result end,
    progress = case when t.cancel_requested_at_ms is null then 1.0 else t.progress end,
    lease_until_ms = null,
    completed_at_ms = (select now_ms from clock),
    updated_at_ms = (select now_ms from clock)
from owned as o
where t.id = o.id
  and t.status = 'running'
returning t.id, t.status, t.queue;
