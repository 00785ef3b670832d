-- Writes hourly rollups (extension table cairnq_attempt_rollups, x0028); rows is a JSON array of [hour_ms, name, queue, attempts, succeeded, failed, retry, canceled, snoozed, lost, released, run_ms, runs, histogram text], of hours history_rollup_clear emptied in the same transaction.
-- Returns nothing.
-- params: rows
insert into cairnq_attempt_rollups (
    hour_ms, name, queue, attempts, succeeded, failed, retry, canceled, snoozed, lost,
    released, run_ms, runs, histogram
)
select json_extract(r.value, '$[0]'), json_extract(r.value, '$[1]'),
       json_extract(r.value, '$[2]'), json_extract(r.value, '$[3]'),
       json_extract(r.value, '$[4]'), json_extract(r.value, '$[5]'),
       json_extract(r.value, '$[6]'), json_extract(r.value, '$[7]'),
       json_extract(r.value, '$[8]'), json_extract(r.value, '$[9]'),
       json_extract(r.value, '$[10]'), json_extract(r.value, '$[11]'),
       json_extract(r.value, '$[12]'), json_extract(r.value, '$[13]')
from json_each(:rows) as r;
