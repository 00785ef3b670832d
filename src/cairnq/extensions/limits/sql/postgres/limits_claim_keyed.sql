-- Claims up to want due queued tasks of queue (and names, unless null) that the one concurrency limit limit_name, governing every such task, has room for: at most its stored amount running per key (no bound once the limit is gone), the key being the JSON path key_path into key_root (payload or metadata), or '' for every task when key_path is null, and the running tasks those the limit governs: of the claim's queue when scope_name is null, else of the task name scope_name in every queue. It reads one page of at most page due tasks after the keyset cursor (after_priority, after_run_at_ms, after_id; all null for the first), leaving out the tasks of full keys and rows locked elsewhere, admits them in claim order while their key has room and claims the admitted. It runs after limits_lock in the same transaction (which may send both at once): the lock makes the counts exact, and this statement's snapshot, taken once the lock is held, sees every claim committed before it and the limit's amount as stored.
-- Returns one row per claimed task (its row, limit_key: its key, null when the key cannot be computed or is over 1000 bytes, so it counts against nothing and the worker fails it), each carrying the page's figures (page_rows, page_full_keys, page_fits: whether the running tasks and the whole claim fit within the amount, page_now_ms, and page_priority, page_run_at_ms, page_id: the page's last row); a page that claimed nothing gives one row of figures with a null id.
-- params: limit_name, scope_name, queue, names, now_ms, after_priority, after_run_at_ms, after_id, key_root, key_path, want, page, worker_id, lease_ms
with clock as materialized (
    select coalesce(:now_ms::bigint, floor(extract(epoch from clock_timestamp()) * 1000)::bigint) as now_ms
),
stored as materialized (
    select coalesce(
        (select amount from cairnq_limits where name = :limit_name::text),
        9223372036854775807
    ) as amount
),
-- The running tasks the limit governs: of the claim's queue (scope_name null), or of the
-- task name scope_name in every queue, found among the running tasks (the name as an
-- expression: no plan walks every task ever kept under it). Not materialized: each
-- reader scans for itself.
scoped as not materialized (
    select t.payload, t.metadata from cairnq_tasks t
    where t.queue = :queue::text and t.status = 'running' and :scope_name::text is null
    union all
    select t.payload, t.metadata from cairnq_tasks t
    where (t.name || '') = :scope_name::text and t.status = 'running'
      and :scope_name::text is not null
),
-- Those tasks counted up to one past amount - want: no key counts more of them than
-- that. While they and the whole claim fit within the amount no key is full, and the
-- claim takes the first want tasks of its page in claim order, each at most the want-th
-- of its key, so every one has room whatever the counts: the per-key count below is
-- skipped, and the claim admits the same tasks.
governed as materialized (
    select count(*) as n
    from (select 1 from scoped limit greatest((select amount from stored) - :want::bigint + 1, 0)) as upto
),
-- Running tasks per key, each task's key read from its own JSON as the page's are below
-- (whoever claimed it: a reference SDK's worker too), a key over 1000 bytes or none
-- counting for nothing.
running as materialized (
    select key.value as key_value, count(*) as n
    from scoped as t
    cross join lateral (
        select case when :key_path::text is null then '' else (
            select case jsonb_typeof(found.value)
                when 'string' then nullif(found.value #>> '{}', '')
                when 'number' then case
                    when found.value::text ~ '^-?[0-9]+$' then found.value::text
                end
            end
            from (
                select jsonb_path_query_first(
                    case when :key_root::text = 'metadata' then t.metadata else t.payload end,
                    ('strict ' || :key_path::text)::jsonpath,
                    '{}'::jsonb,
                    true
                ) as value
            ) as found
        ) end as value
    ) as key
    where (select n from governed) + :want::bigint > (select amount from stored)
      and octet_length(key.value) <= 1000
    group by key.value
),
full_keys as materialized (
    select key_value from running where n >= (select amount from stored)
),
due as materialized (
    -- A key over 1000 bytes is no key (as in running: it is never among the full keys).
    select t.id, t.priority, t.run_at_ms,
        case when octet_length(key.value) <= 1000 then key.value end as key_value
    from cairnq_tasks t
    cross join lateral (
        -- The key text as limits.key_text gives it: a non-empty string as it is, an
        -- integer as its digits, anything else null. A jsonb number prints without an
        -- exponent, so one without a point is an integer. The strict path reads object
        -- members only, as Python does.
        select case when :key_path::text is null then '' else (
            select case jsonb_typeof(found.value)
                when 'string' then nullif(found.value #>> '{}', '')
                when 'number' then case
                    when found.value::text ~ '^-?[0-9]+$' then found.value::text
                end
            end
            from (
                select jsonb_path_query_first(
                    case when :key_root::text = 'metadata' then t.metadata else t.payload end,
                    ('strict ' || :key_path::text)::jsonpath,
                    '{}'::jsonb,
                    true
                ) as value
            ) as found
        ) end as value
    ) as key
    where t.queue = :queue::text
      and t.status = 'queued'
      and (:names::text[] is null or t.name = any(:names::text[]))
      and t.run_at_ms <= (select now_ms from clock)
      and (
          :after_id::text is null
          or t.priority < :after_priority::integer
          or (t.priority = :after_priority::integer and (
              t.run_at_ms > :after_run_at_ms::bigint
              or (t.run_at_ms = :after_run_at_ms::bigint and t.id > :after_id::text)
          ))
      )
      and (key.value in (select key_value from full_keys)) is not true
    order by t.priority desc, t.run_at_ms, t.id
    limit :page::bigint
    for update of t skip locked
),
chosen as (
    select ranks.id, ranks.key_value
    from (
        select d.*, row_number() over (
            partition by d.key_value order by d.priority desc, d.run_at_ms, d.id
        ) as nth
        from due d
    ) as ranks
    left join running r on r.key_value = ranks.key_value
    where ranks.key_value is null or ranks.nth + coalesce(r.n, 0) <= (select amount from stored)
    order by ranks.priority desc, ranks.run_at_ms, ranks.id
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
figures as (
    select (select count(*) from due) as page_rows,
        (select count(*) from full_keys) as page_full_keys,
        (select n from governed) + :want::bigint <= (select amount from stored) as page_fits,
        (select now_ms from clock) as page_now_ms,
        last.priority as page_priority,
        last.run_at_ms as page_run_at_ms,
        last.id as page_id
    from (select 1) one
    left join lateral (
        select priority, run_at_ms, id
        from due
        order by priority, run_at_ms desc, id desc
        limit 1
    ) last on true
)
select f.*, c.*
from figures f
left join claimed c on true;
