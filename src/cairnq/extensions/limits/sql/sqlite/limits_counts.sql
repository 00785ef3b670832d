-- The running counts of the named limits' keys (keys counting none are left out).
-- Returns (limit_name, key_value, running).
-- params: names
select limit_name, key_value, running
from cairnq_limit_counts
where limit_name in (select value from json_each(:names))
  and running > 0;
