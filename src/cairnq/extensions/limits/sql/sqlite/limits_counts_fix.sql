-- Sets the listed running counts to the number of keys recorded for them; rows is a JSON array of [limit_name, key_value].
-- Returns (limit_name, key_value, running) per count set.
-- params: rows
update cairnq_limit_counts
set running = (
    select count(*) from cairnq_limit_keys k
    where k.limit_name = cairnq_limit_counts.limit_name
      and k.key_value = cairnq_limit_counts.key_value
)
where exists (
    select 1 from json_each(:rows) as r
    where json_extract(r.value, '$[0]') = cairnq_limit_counts.limit_name
      and json_extract(r.value, '$[1]') = cairnq_limit_counts.key_value
)
returning limit_name, key_value, running;
