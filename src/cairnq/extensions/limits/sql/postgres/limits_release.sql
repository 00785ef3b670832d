-- Forgets the recorded keys of the listed tasks (their attempts ended: settled, handed back or recovered) and takes each from its key's running count, locking the counts in key order.
-- Returns nothing.
-- params: ids
with gone as (
    delete from cairnq_limit_keys
    where task_id = any(:ids::text[])
    returning limit_name, key_value
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
where c.limit_name = locked.limit_name and c.key_value = locked.key_value;
