-- Records the outcome of members that just ended; rows is a JSON array of [task_id, status]. Only a member whose outcome is not recorded yet changes: the first end recorded stays.
-- Returns (batch_id) per member recorded.
-- params: rows, now_ms
with clock as materialized (
    select coalesce(:now_ms::bigint, floor(extract(epoch from clock_timestamp()) * 1000)::bigint) as now_ms
), ended as (
    select r ->> 0 as task_id, r ->> 1 as status from jsonb_array_elements(:rows::jsonb) as r
)
update cairnq_batch_members as m
set outcome = e.status, ended_at_ms = clock.now_ms
from ended as e, clock
where m.task_id = e.task_id and m.outcome is null
returning m.batch_id;
