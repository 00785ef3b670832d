-- Reads the named limits as stored.
-- Returns one row per limit that exists.
-- params: names
select name, scope, target, key_path, kind, amount, period_ms, burst, source, updated_at_ms
from cairnq_limits
where name in (select value from json_each(:names))
order by name;
