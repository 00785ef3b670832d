-- Claims the first want due queued tasks of queue (and names, unless null) in claim order, skipping rows locked elsewhere, when the one concurrency limit limit_name governing every such task cannot bind this claim: the running tasks it governs (of the claim's queue when scope_name is null, else of the task name scope_name in every queue) and the whole claim fit within its stored amount (no bound once the limit is gone), so no key can fill whatever the keys, and the claim takes what limits_claim_keyed would. Claims nothing when they do not fit. It runs after limits_lock in the same transaction (which may send both at once): the lock makes the count exact, and this statement's snapshot, taken once the lock is held, sees every claim committed before it.
-- Returns the claimed rows (running, owned by worker_id: a worker's id and claim nonce; in no set order), each with limit_key: its key by the JSON path key_path into key_root (payload or metadata; '' for every task when key_path is null), null when the key cannot be computed; a key over 1000 bytes comes back as it is (the worker fails the task in both cases); zero rows when the claim does not fit or nothing is due.
-- params: limit_name, scope_name, queue, names, now_ms, key_root, key_path, want, worker_id, lease_ms
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
-- Those tasks counted up to one past amount - want, as limits_claim_keyed counts them.
governed as materialized (
    select count(*) as n
    from (select 1 from scoped limit greatest((select amount from stored) - :want::bigint + 1, 0)) as upto
),
picked as materialized (
    select t.id
    from cairnq_tasks t
    where t.queue = :queue::text
      and t.status = 'queued'
      and (:names::text[] is null or t.name = any(:names::text[]))
      and t.run_at_ms <= (select now_ms from clock)
    order by t.priority desc, t.run_at_ms asc, t.id asc
    limit (
        select case when (select n from governed) + :want::bigint <= (select amount from stored)
            then :want::bigint else 0 end
    )
    for update of t skip locked
)
update cairnq_tasks t
set status = 'running',
    worker_id = :worker_id::text,
    lease_until_ms = (select now_ms from clock) + :lease_ms::bigint,
    attempt = t.attempt + 1,
    updated_at_ms = (select now_ms from clock)
where t.id in (select id from picked)
  and t.status = 'queued'
returning t.*, (
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
    ) end
) as limit_key;
