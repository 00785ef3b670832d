-- Records parked tasks (extension table cairnq_parked, x0008); rows is a JSON array of [task_id, reason, delay_ms].
-- Returns nothing.
-- params: rows, now_ms
with clock as materialized (
    select coalesce(:now_ms::bigint, floor(extract(epoch from clock_timestamp()) * 1000)::bigint) as now_ms
)
insert into cairnq_parked (task_id, reason, delay_ms, parked_at_ms)
select r ->> 0, r ->> 1, (r ->> 2)::bigint, clock.now_ms
from jsonb_array_elements(:rows::jsonb) as r, clock
on conflict (task_id) do update
set reason = excluded.reason, delay_ms = excluded.delay_ms, parked_at_ms = excluded.parked_at_ms;
