-- The running counts of the named limits that differ from the number of keys recorded for them (a count the reconciliation corrects; SQLite's write transaction holds them already).
-- Returns (limit_name, key_value) per count.
-- params: names
select c.limit_name, c.key_value
from cairnq_limit_counts c
where c.limit_name in (select value from json_each(:names))
  and c.running <> (
      select count(*) from cairnq_limit_keys k
      where k.limit_name = c.limit_name and k.key_value = c.key_value
  )
order by c.limit_name, c.key_value;
