-- Every limit (extension table cairnq_limits, x0006), by name.
-- Returns one row per limit.
-- params: none
select name, scope, target, key_path, kind, amount, period_ms, burst, source, updated_at_ms
from cairnq_limits
order by name;
