-- Reads the named limits, locking their rows until the transaction ends, in name order: claims under one limit run one at a time, so the counts each reads are exact.
-- Returns one row per limit that exists.
-- params: names
select name, scope, target, key_path, kind, amount, period_ms, burst, source, updated_at_ms
from cairnq_limits
where name = any(:names::text[])
order by name
for update;
