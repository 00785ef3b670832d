-- Records ended attempts (extension table cairnq_task_attempts, x0009); rows is a JSON array of [task_id, claim, attempt, worker_id, started_at_ms, outcome, error text or null]. A claim recorded already is left as it is.
-- Returns nothing.
-- params: rows, now_ms
with clock as materialized (
    select coalesce(:now_ms::bigint, floor(extract(epoch from clock_timestamp()) * 1000)::bigint) as now_ms
)
insert into cairnq_task_attempts (
    task_id, claim, attempt, worker_id, started_at_ms, ended_at_ms, outcome, error
)
select r ->> 0, (r ->> 1)::bigint, (r ->> 2)::integer, r ->> 3, (r ->> 4)::bigint,
       clock.now_ms, r ->> 5, (r ->> 6)::jsonb
from jsonb_array_elements(:rows::jsonb) as r, clock
on conflict (task_id, claim) do nothing;
