-- Takes the per-key transaction locks of many keys, in one fixed order so two batches never deadlock; keys is a JSON array of strings.
-- Returns one row per key.
-- params: keys
select pg_advisory_xact_lock(hashtextextended(k, 0)) as locked
from (select distinct k from jsonb_array_elements_text(:keys::jsonb) as k order by k) as keys_in_order;
