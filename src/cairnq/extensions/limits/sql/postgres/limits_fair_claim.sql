-- Claims up to want due queued tasks of the shared queue (and names, unless null), sharing them among the keys recorded in cairnq_fair_tasks: it walks the distinct keys of the queue (a loose index scan), takes the first want due queued tasks of each in claim order, and admits them by (running + nth) / weight, fewest first (ties in claim order), where running counts the key's running tasks (without cap_limit: those recorded under count_name; with it: every running task of the queue, under the key its JSON gives by key_root and key_path, the share's path) and nth is the task's place among its key's candidates; no key gets more than cap_limit's stored amount running (no bound when cap_limit is null or gone). Claims the admitted tasks and, without cap_limit, records their keys under count_name. It runs after limits_fair_lock (and limits_lock for cap_limit) in the same transaction (which may send them at once): the locks make the counts exact.
-- Returns one row per claimed task (its row, limit_key: its key), in no particular order.
-- params: queue, names, now_ms, want, worker_id, lease_ms, count_name, cap_limit, key_root, key_path
with recursive clock as materialized (
    select coalesce(:now_ms::bigint, floor(extract(epoch from clock_timestamp()) * 1000)::bigint) as now_ms
),
cap as materialized (
    select coalesce(
        (select amount from cairnq_limits where name = :cap_limit::text),
        9223372036854775807
    ) as amount
),
-- Without a cap, the running tasks the fair claims recorded under count_name; under one,
-- every running task of the queue under the key its own JSON gives (key_root, key_path:
-- the share's path, which the cap shares), whoever claimed it, as the cap counts them.
running as materialized (
    select k.key_value, count(*) as n
    from cairnq_limit_keys k
    join cairnq_tasks t on t.id = k.task_id
    where k.limit_name = :count_name::text
      and t.status = 'running'
      and :cap_limit::text is null
    group by k.key_value
    union all
    select key.value, count(*)
    from cairnq_tasks t
    cross join lateral (
        select case jsonb_typeof(found.value)
            when 'string' then nullif(found.value #>> '{}', '')
            when 'number' then case
                when found.value::text ~ '^-?[0-9]+$' then found.value::text
            end
        end as value
        from (
            select jsonb_path_query_first(
                case when :key_root::text = 'metadata' then t.metadata else t.payload end,
                ('strict ' || :key_path::text)::jsonpath,
                '{}'::jsonb,
                true
            ) as value
        ) as found
    ) as key
    where t.queue = :queue::text
      and t.status = 'running'
      and :cap_limit::text is not null
      and octet_length(key.value) <= 1000
    group by key.value
),
weights as materialized (
    select w.key as key_value, greatest(w.value::bigint, 1) as weight
    from cairnq_fair_shares s
    cross join jsonb_each_text(s.weights) as w
    where s.queue = :queue::text
),
keys (key_value) as (
    select min(key_value) from cairnq_fair_tasks where queue = :queue::text
    union all
    select (
        select min(f.key_value)
        from cairnq_fair_tasks f
        where f.queue = :queue::text and f.key_value > keys.key_value
    )
    from keys
    where keys.key_value is not null
),
candidates as materialized (
    select k.key_value, c.id, c.priority, c.run_at_ms, c.nth
    from keys k
    cross join lateral (
        select picked.id, picked.priority, picked.run_at_ms,
            row_number() over (order by picked.fp desc, picked.fr asc, picked.id asc) as nth
        from (
            select t.id, t.priority, t.run_at_ms, f.priority as fp, f.run_at_ms as fr
            from cairnq_fair_tasks f
            -- Each task by its primary key, in the walk's order (offset 0 keeps the
            -- planner from joining the key's rows to a scan of every queued task).
            cross join lateral (
                select t.id, t.priority, t.run_at_ms, t.status, t.name
                from cairnq_tasks t
                where t.id = f.task_id
                offset 0
            ) as t
            where f.queue = :queue::text
              and f.key_value = k.key_value
              and t.status = 'queued'
              and t.run_at_ms <= (select now_ms from clock)
              and (:names::text[] is null or t.name = any(:names::text[]))
            order by f.priority desc, f.run_at_ms asc, f.task_id asc
            limit :want::bigint
        ) as picked
    ) as c
    where k.key_value is not null
),
chosen as (
    select c.id, c.key_value
    from candidates c
    left join running r on r.key_value = c.key_value
    left join weights w on w.key_value = c.key_value
    where coalesce(r.n, 0) + c.nth <= (select amount from cap)
    order by (coalesce(r.n, 0) + c.nth)::double precision / coalesce(w.weight, 1),
        c.priority desc, c.run_at_ms asc, c.id asc
    limit :want::bigint
),
claimed as (
    update cairnq_tasks t
    set status = 'running',
        worker_id = :worker_id::text,
        lease_until_ms = (select now_ms from clock) + :lease_ms::bigint,
        attempt = t.attempt + 1,
        updated_at_ms = (select now_ms from clock)
    from chosen c
    where t.id = c.id
      and t.status = 'queued'
    returning t.*, c.key_value as limit_key
),
recorded as (
    insert into cairnq_limit_keys (task_id, limit_name, key_value)
    select id, :count_name::text, limit_key
    from claimed
    where :cap_limit::text is null
    on conflict (task_id, limit_name) do update set key_value = excluded.key_value
)
select * from claimed;
