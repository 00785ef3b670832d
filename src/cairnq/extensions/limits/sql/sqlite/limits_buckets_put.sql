-- Stores rate buckets; rows is a JSON array of [limit_name, key_value, tokens, refreshed_at_ms].
-- Returns nothing.
-- params: rows
insert into cairnq_rate_buckets (limit_name, key_value, tokens, refreshed_at_ms)
select json_extract(value, '$[0]'), json_extract(value, '$[1]'), json_extract(value, '$[2]'),
    json_extract(value, '$[3]')
from json_each(:rows)
where true
on conflict (limit_name, key_value) do update set
    tokens = excluded.tokens, refreshed_at_ms = excluded.refreshed_at_ms;
