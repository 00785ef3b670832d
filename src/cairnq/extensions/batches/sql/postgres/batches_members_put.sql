-- Records members of a batch; rows is a JSON array of [batch_id, task_id, outcome] (outcome null for a member that has not ended). A member already recorded stays as it is.
-- Returns nothing.
-- params: rows, now_ms
with clock as materialized (
    select coalesce(:now_ms::bigint, floor(extract(epoch from clock_timestamp()) * 1000)::bigint) as now_ms
)
insert into cairnq_batch_members (batch_id, task_id, outcome, ended_at_ms)
select r ->> 0, r ->> 1, r ->> 2, case when r ->> 2 is not null then clock.now_ms end
from jsonb_array_elements(:rows::jsonb) as r, clock
on conflict (batch_id, task_id) do nothing;
