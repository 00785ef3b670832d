-- Counts the keys a limited claim admits and records them; rows is a JSON array of [task_id, limit_name, key_value, rank], rank being the task's place (1, 2, ...) among the claim's tasks of that limit and key. Each key's count grows by as many of its tasks as its limit (the stored amount) still has room for, under the key's row lock alone: claims of other keys never wait, and a claim that read an older count is granted only the room left. The tasks of rank up to the grant have their keys recorded.
-- Returns (task_id, limit_name) for each task and limit granted.
-- params: rows
with wanted as (
    select r ->> 0 as task_id, r ->> 1 as limit_name, r ->> 2 as key_value, (r ->> 3)::bigint as rank
    from jsonb_array_elements(:rows::jsonb) as r
),
asked as (
    select w.limit_name, w.key_value, least(count(*), min(l.amount)) as n
    from wanted w
    join cairnq_limits l on l.name = w.limit_name
    group by w.limit_name, w.key_value
),
granted as (
    insert into cairnq_limit_counts as c (limit_name, key_value, running, granted)
    select limit_name, key_value, n, n
    from asked
    order by limit_name, key_value
    on conflict (limit_name, key_value) do update set
        granted = greatest(0, least(
            excluded.granted,
            (select l.amount from cairnq_limits l where l.name = c.limit_name) - c.running
        )),
        running = c.running + greatest(0, least(
            excluded.granted,
            (select l.amount from cairnq_limits l where l.name = c.limit_name) - c.running
        ))
    returning c.limit_name, c.key_value, c.granted
),
kept as (
    insert into cairnq_limit_keys (task_id, limit_name, key_value)
    select w.task_id, w.limit_name, w.key_value
    from wanted w
    join granted g on g.limit_name = w.limit_name and g.key_value = w.key_value
    where w.rank <= g.granted
    on conflict (task_id, limit_name) do update set key_value = excluded.key_value
    returning task_id, limit_name
)
select task_id, limit_name from kept;
