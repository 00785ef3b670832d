-- Writes hourly rollups (extension table cairnq_attempt_rollups, x0028); rows is a JSON array of [hour_ms, name, queue, attempts, succeeded, failed, retry, canceled, snoozed, lost, released, run_ms, runs, histogram text], of hours history_rollup_clear emptied in the same transaction.
-- Returns nothing.
-- params: rows
insert into cairnq_attempt_rollups (
    hour_ms, name, queue, attempts, succeeded, failed, retry, canceled, snoozed, lost,
    released, run_ms, runs, histogram
)
select (r ->> 0)::bigint, r ->> 1, r ->> 2, (r ->> 3)::bigint, (r ->> 4)::bigint,
       (r ->> 5)::bigint, (r ->> 6)::bigint, (r ->> 7)::bigint, (r ->> 8)::bigint,
       (r ->> 9)::bigint, (r ->> 10)::bigint, (r ->> 11)::bigint, (r ->> 12)::bigint,
       r ->> 13
from jsonb_array_elements(:rows::jsonb) as r;
