-- Records what handlers logged in the attempts a settlement ended (extension table cairnq_task_logs, x0022); rows is a JSON array of [task_id, claim, attempt, lines (a JSON array), dropped]. A claim recorded already is left as it is.
-- Returns nothing.
-- params: rows, now_ms
insert into cairnq_task_logs (task_id, claim, attempt, lines, dropped, recorded_at_ms)
select r ->> 0, (r ->> 1)::bigint, (r ->> 2)::integer, (r -> 3)::text, (r ->> 4)::integer,
       coalesce(:now_ms::bigint, floor(extract(epoch from clock_timestamp()) * 1000)::bigint)
from jsonb_array_elements(:rows::jsonb) as r
on conflict (task_id, claim) do nothing;
