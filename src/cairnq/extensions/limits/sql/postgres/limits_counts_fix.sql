-- Sets the listed running counts to the number of keys recorded for them; rows is a JSON array of [limit_name, key_value], locked by limits_counts_lock earlier in the transaction.
-- Returns (limit_name, key_value, running) per count set.
-- params: rows
update cairnq_limit_counts c
set running = (
    select count(*) from cairnq_limit_keys k
    where k.limit_name = c.limit_name and k.key_value = c.key_value
)
from jsonb_array_elements(:rows::jsonb) as r
where c.limit_name = r ->> 0 and c.key_value = r ->> 1
returning c.limit_name, c.key_value, c.running;
