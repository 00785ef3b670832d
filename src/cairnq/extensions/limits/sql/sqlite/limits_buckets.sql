-- The rate buckets of the named limits (all their keys).
-- Returns (limit_name, key_value, tokens, refreshed_at_ms) per bucket.
-- params: names
select limit_name, key_value, tokens, refreshed_at_ms
from cairnq_rate_buckets
where limit_name in (select value from json_each(:names));
