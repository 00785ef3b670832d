-- Records the policies one submit gave a task (cairnq_policies_tasks, x0020).
-- Returns nothing.
-- params: id, expires_in_ms (null: no expiry), run_timeout_ms, retry (JSON text), now_ms
with clock as materialized (
    select coalesce(:now_ms::bigint, floor(extract(epoch from clock_timestamp()) * 1000)::bigint) as now_ms
)
insert into cairnq_policies_tasks (task_id, expires_at_ms, run_timeout_ms, retry, created_at_ms)
select
    :id::text,
    clock.now_ms + :expires_in_ms::bigint,
    :run_timeout_ms::bigint,
    :retry::jsonb,
    clock.now_ms
from clock;
