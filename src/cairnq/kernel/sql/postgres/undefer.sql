-- Undoes defer: each task of ids still queued and due at run_at_ms becomes due its delay (delays_ms, one per id) after now.
-- Returns the updated rows.
-- params: ids, delays_ms, run_at_ms, now_ms
with clock as materialized (
    select coalesce(:now_ms::bigint, floor(extract(epoch from clock_timestamp()) * 1000)::bigint) as now_ms
),
wanted as (
    select w.id, w.delay_ms
    from unnest(:ids::text[], :delays_ms::bigint[]) as w(id, delay_ms)
)
update cairnq_tasks as t
set run_at_ms = (select now_ms from clock) + w.delay_ms,
    updated_at_ms = (select now_ms from clock)
from wanted as w
where t.id = w.id and t.status = 'queued'
  and t.run_at_ms = :run_at_ms::bigint
returning t.*;
