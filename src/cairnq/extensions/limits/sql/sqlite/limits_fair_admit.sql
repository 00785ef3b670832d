-- Chooses up to want due queued tasks of the shared queue (and names, unless null), sharing them among the keys recorded in cairnq_fair_tasks: it walks the distinct keys of the queue (a loose index scan), takes the first want due queued tasks of each in claim order (a walk of the index per key), and admits them by (running + nth) / weight, fewest first (ties in claim order), where running counts the key's running tasks (without cap_limit: those recorded under count_name; with it: every running task of the queue, under the key its JSON gives by key_root and key_path, the share's path) and nth is the task's place among its key's candidates; no key gets more than cap_limit's stored amount running (no bound when cap_limit is null or gone). Runs inside the claim's write transaction (which SQLite runs one at a time, so the counts are exact); the caller claims the chosen tasks (claim_ids) and, without cap_limit, records their keys.
-- Returns one row per chosen task (id, limit_key: its key).
-- params: queue, names, now_ms, want, count_name, cap_limit, key_root, key_path
with recursive
keys (key_value) as (
    select min(key_value) from cairnq_fair_tasks where queue = :queue
    union all
    select (
        select min(f.key_value)
        from cairnq_fair_tasks f
        where f.queue = :queue and f.key_value > keys.key_value
    )
    from keys
    where keys.key_value is not null
),
walk (key_value, task_id, nth) as (
    select keys.key_value, (
        select f.task_id
        from cairnq_fair_tasks f
        join cairnq_tasks t on t.id = f.task_id
        where f.queue = :queue
          and f.key_value = keys.key_value
          and t.status = 'queued'
          and t.run_at_ms <= :now_ms
          and (:names is null or t.name in (select value from json_each(:names)))
        order by f.priority desc, f.run_at_ms asc, f.task_id asc
        limit 1
    ), 1
    from keys
    where keys.key_value is not null
    union all
    select w.key_value, (
        select f.task_id
        from cairnq_fair_tasks c
        join cairnq_fair_tasks f on f.queue = c.queue and f.key_value = c.key_value
        join cairnq_tasks t on t.id = f.task_id
        where c.task_id = w.task_id
          and (
              f.priority < c.priority
              or (f.priority = c.priority and (
                  f.run_at_ms > c.run_at_ms
                  or (f.run_at_ms = c.run_at_ms and f.task_id > c.task_id)
              ))
          )
          and t.status = 'queued'
          and t.run_at_ms <= :now_ms
          and (:names is null or t.name in (select value from json_each(:names)))
        order by f.priority desc, f.run_at_ms asc, f.task_id asc
        limit 1
    ), w.nth + 1
    from walk w
    where w.task_id is not null and w.nth < :want
),
cap as materialized (
    select coalesce(
        (select amount from cairnq_limits where name = :cap_limit),
        9223372036854775807
    ) as amount
),
-- Without a cap, the running tasks the fair claims recorded under count_name; under one,
-- every running task of the queue under the key its own JSON gives (key_root, key_path:
-- the share's path, which the cap shares), whoever claimed it, as the cap counts them
-- (grouped by the key itself, with no temporary table of keys).
running as materialized (
    select k.key_value, count(*) as n
    from cairnq_limit_keys k
    join cairnq_tasks t on t.id = k.task_id
    where k.limit_name = :count_name
      and t.status = 'running'
      and :cap_limit is null
    group by k.key_value
    union all
    select (
        case json_type(iif(:key_root = 'metadata', t.metadata, t.payload), :key_path)
            when 'text' then nullif(json_extract(iif(:key_root = 'metadata', t.metadata, t.payload), :key_path), '')
            -- An integer as SQLite holds it prints as its digits; past 64 bits json_extract
            -- gives a float, and the two-path form gives the JSON text [n,n], whose n is
            -- the integer as written.
            when 'integer' then case when typeof(json_extract(iif(:key_root = 'metadata', t.metadata, t.payload), :key_path)) = 'integer'
                then cast(json_extract(iif(:key_root = 'metadata', t.metadata, t.payload), :key_path) as text)
                else substr(
                    json_extract(iif(:key_root = 'metadata', t.metadata, t.payload), :key_path, :key_path), 2,
                    instr(json_extract(iif(:key_root = 'metadata', t.metadata, t.payload), :key_path, :key_path), ',') - 2
                )
            end
        end
    ) as key_value, count(*)
    from cairnq_tasks t
    where t.queue = (select :queue where :cap_limit is not null)
      and t.status = 'running'
    group by 1
    having length(cast(key_value as blob)) <= 1000
),
weights as materialized (
    select w.key as key_value, max(cast(w.value as integer), 1) as weight
    from cairnq_fair_shares s, json_each(s.weights) as w
    where s.queue = :queue
)
select w.task_id as id, w.key_value as limit_key
from walk w
join cairnq_tasks t on t.id = w.task_id
left join running r on r.key_value = w.key_value
left join weights g on g.key_value = w.key_value
where w.task_id is not null
  and coalesce(r.n, 0) + w.nth <= (select amount from cap)
order by (coalesce(r.n, 0) + w.nth) * 1.0 / coalesce(g.weight, 1),
    t.priority desc, t.run_at_ms asc, t.id asc
limit :want;
