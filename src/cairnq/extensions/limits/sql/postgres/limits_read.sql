-- Reads the named limits as stored, without locking them (a concurrency limit's counts hold their own locks).
-- Returns one row per limit that exists.
-- params: names
select name, scope, target, key_path, kind, amount, period_ms, burst, source, updated_at_ms
from cairnq_limits
where name = any(:names::text[])
order by name;
