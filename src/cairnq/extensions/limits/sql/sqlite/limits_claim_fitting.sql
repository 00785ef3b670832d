-- Claims the first want due queued tasks of queue (and names, unless null) in claim order when the one concurrency limit limit_name governing every such task cannot bind this claim: the running tasks it governs (of the claim's queue when scope_name is null, else of the task name scope_name in every queue) and the whole claim fit within its stored amount (no bound once the limit is gone), so no key can fill whatever the keys, and the claim takes what limits_admit_keyed would admit. Claims nothing when they do not fit. Runs inside the claim's write transaction (which SQLite runs one at a time, so the count is exact).
-- Returns the claimed rows (running, owned by worker_id, in no set order), each with limit_key: its key by the JSON path key_path into key_root (payload or metadata; '' for every task when key_path is null) as UTF-8 bytes, null when the key cannot be computed; a key over 1000 bytes comes back as it is (the worker fails the task in both cases); zero rows when the claim does not fit or nothing is due.
-- params: limit_name, scope_name, queue, names, now_ms, key_root, key_path, want, worker_id, lease_ms
with stored as materialized (
    select coalesce(
        (select amount from cairnq_limits where name = :limit_name),
        9223372036854775807
    ) as amount
),
-- As limits_admit_keyed counts them: up to one past amount - want.
governed as materialized (
    select count(*) as n
    from (
        select 1 from cairnq_tasks t
        where t.queue = :queue and t.status = 'running' and :scope_name is null
        union all
        select 1 from (select 1 where :scope_name is not null) as named
        cross join cairnq_tasks t
        where +t.name = :scope_name and t.status = 'running'
        limit max((select amount from stored) - :want + 1, 0)
    ) as upto
)
update cairnq_tasks
set status = 'running',
    worker_id = :worker_id,
    lease_until_ms = :now_ms + :lease_ms,
    attempt = attempt + 1,
    updated_at_ms = :now_ms
where id in (
    select t.id
    from cairnq_tasks t
    where t.queue = :queue
      and t.status = 'queued'
      and (:names is null or t.name in (select value from json_each(:names)))
      and t.run_at_ms <= :now_ms
    order by t.priority desc, t.run_at_ms asc, t.id asc
    limit (
        select case when (select n from governed) + :want <= (select amount from stored)
            then :want else 0 end
    )
)
returning *, cast(
    case when :key_path is null then '' else (
        -- The key text as limits.key_text gives it: a non-empty string as it is, an
        -- integer as its digits, anything else null.
        case json_type(iif(:key_root = 'metadata', metadata, payload), :key_path)
            when 'text' then nullif(json_extract(iif(:key_root = 'metadata', metadata, payload), :key_path), '')
            -- An integer as SQLite holds it prints as its digits; past 64 bits json_extract
            -- gives a float, and the two-path form gives the JSON text [n,n], whose n is
            -- the integer as written.
            when 'integer' then case when typeof(json_extract(iif(:key_root = 'metadata', metadata, payload), :key_path)) = 'integer'
                then cast(json_extract(iif(:key_root = 'metadata', metadata, payload), :key_path) as text)
                else substr(
                    json_extract(iif(:key_root = 'metadata', metadata, payload), :key_path, :key_path), 2,
                    instr(json_extract(iif(:key_root = 'metadata', metadata, payload), :key_path, :key_path), ',') - 2
                )
            end
        end
    ) end as blob
) as limit_key;
