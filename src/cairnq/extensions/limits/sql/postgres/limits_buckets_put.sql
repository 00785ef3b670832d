-- Stores rate buckets; rows is a JSON array of [limit_name, key_value, tokens, refreshed_at_ms].
-- Returns nothing.
-- params: rows
insert into cairnq_rate_buckets (limit_name, key_value, tokens, refreshed_at_ms)
select r ->> 0, r ->> 1, (r ->> 2)::double precision, (r ->> 3)::bigint
from jsonb_array_elements(:rows::jsonb) as r
on conflict (limit_name, key_value) do update set
    tokens = excluded.tokens, refreshed_at_ms = excluded.refreshed_at_ms;
