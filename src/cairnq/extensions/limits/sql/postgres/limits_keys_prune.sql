-- Forgets the recorded keys of the named limits whose task is no longer running (a reference SDK worker settled or recovered it, or it was purged), and takes each from its key's running count, locking the counts in key order.
-- Returns (limit_name, key_value, n) for each count it lowered.
-- params: names
with gone as (
    delete from cairnq_limit_keys k
    where k.limit_name = any(:names::text[])
      and not exists (
          select 1 from cairnq_tasks t where t.id = k.task_id and t.status = 'running'
      )
    returning k.limit_name, k.key_value
),
freed as (
    select limit_name, key_value, count(*) as n
    from gone
    group by limit_name, key_value
),
locked as (
    select c.limit_name, c.key_value, f.n
    from cairnq_limit_counts c
    join freed f on f.limit_name = c.limit_name and f.key_value = c.key_value
    order by c.limit_name, c.key_value
    for update of c
)
update cairnq_limit_counts c
set running = greatest(0, c.running - locked.n)
from locked
where c.limit_name = locked.limit_name and c.key_value = locked.key_value
returning c.limit_name, c.key_value, locked.n;
