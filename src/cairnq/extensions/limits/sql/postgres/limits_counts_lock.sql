-- Locks, in key order, the running counts of the named limits the reconciliation corrects: those that differ from the number of keys recorded for them, and those of keys recorded for a task no longer running or with no count (recorded by a worker without x0030), added at 0. A limited claim locks a key's count before its recorded keys (limits_take), so a claim that took one of these keys has committed when this returns, and none takes one until the reconciliation ends; the prune (limits_keys_prune) and the correction (limits_counts_fix) run in later statements.
-- Returns (limit_name, key_value) per count locked.
-- params: names
with wanted as (
    select c.limit_name, c.key_value
    from cairnq_limit_counts c
    where c.limit_name = any(:names::text[])
      and c.running <> (
          select count(*) from cairnq_limit_keys k
          where k.limit_name = c.limit_name and k.key_value = c.key_value
      )
    union
    select k.limit_name, k.key_value
    from cairnq_limit_keys k
    where k.limit_name = any(:names::text[])
      and (
          not exists (
              select 1 from cairnq_tasks t where t.id = k.task_id and t.status = 'running'
          )
          or not exists (
              select 1 from cairnq_limit_counts c
              where c.limit_name = k.limit_name and c.key_value = k.key_value
          )
      )
)
insert into cairnq_limit_counts as c (limit_name, key_value, running, granted)
select limit_name, key_value, 0, 0
from wanted
order by limit_name, key_value
on conflict (limit_name, key_value) do update set running = c.running
returning c.limit_name, c.key_value;
