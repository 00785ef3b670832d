-- Locks, in key order, the running counts of the named limits that differ from the number of keys recorded for them (a count the reconciliation corrects); the correction (limits_counts_fix) runs in a later statement, which sees every claim and settlement that held one of these rows before.
-- Returns (limit_name, key_value) per count locked.
-- params: names
select c.limit_name, c.key_value
from cairnq_limit_counts c
where c.limit_name = any(:names::text[])
  and c.running <> (
      select count(*) from cairnq_limit_keys k
      where k.limit_name = c.limit_name and k.key_value = c.key_value
  )
order by c.limit_name, c.key_value
for update;
