-- Chooses up to want due queued tasks of queue (and names, unless null) that the one concurrency limit limit_name, governing every such task, has room for: at most its stored amount running per key (no bound once the limit is gone), the key being the JSON path key_path into key_root (payload or metadata), or '' for every task when key_path is null, and the running tasks those the limit governs: of the claim's queue when scope_name is null, else of the task name scope_name in every queue. It reads one page of at most page due tasks after the keyset cursor (after_priority, after_run_at_ms, after_id; all null for the first), leaving out the tasks of full keys, and admits them in claim order while their key has room. Runs inside the claim's write transaction (which SQLite runs one at a time, so the counts are exact); the caller claims the chosen tasks (claim_ids).
-- Returns one row per chosen task (id, limit_key: its key as UTF-8 bytes, null when the key cannot be computed or is over 1000 bytes, so it counts against nothing and the worker fails it), each carrying the page's figures (page_rows, page_full_keys, page_fits: whether the running tasks and the whole claim fit within the amount, and page_priority, page_run_at_ms, page_id: the page's last row); a page that chose nothing gives one row of figures with a null id.
-- params: limit_name, scope_name, queue, names, now_ms, after_priority, after_run_at_ms, after_id, key_root, key_path, want, page
with stored as materialized (
    select coalesce(
        (select amount from cairnq_limits where name = :limit_name),
        9223372036854775807
    ) as amount
),
-- The running tasks the limit governs, counted up to one past amount - want: no key
-- counts more of them than that. While they and the whole claim fit within the amount no
-- key is full, and the claim takes the first want tasks of its page in claim order, each
-- at most the want-th of its key, so every one has room whatever the counts: the per-key
-- count below is skipped, and the claim admits the same tasks. A queue's limit governs
-- the claim's queue (scope_name null); a task name's limit, that name in every queue,
-- found among the running tasks (+name: not among every task ever kept under the name).
governed as materialized (
    select count(*) as n
    from (
        select 1 from cairnq_tasks t
        where t.queue = :queue and t.status = 'running' and :scope_name is null
        union all
        -- A task name's branch: the one-row gate on the left of the cross join (which
        -- SQLite keeps outermost) holds no row for a queue's limit, so nothing is read.
        select 1 from (select 1 where :scope_name is not null) as named
        cross join cairnq_tasks t
        where +t.name = :scope_name and t.status = 'running'
        limit max((select amount from stored) - :want + 1, 0)
    ) as upto
),
-- Running tasks per key, each task's key read from its own JSON as the page's are below
-- (whoever claimed it: a reference SDK's worker too), a key over 1000 bytes or none
-- counting for nothing; grouped by the key itself (no temporary table of keys).
-- When the claim fits (see governed) nothing is read: the gate is in the queue the index
-- is searched by (a null queue ends the search before its first row), and a test before
-- a task name's scan.
running as materialized (
    select case when :key_path is null then '' else (
        -- The key text as limits.key_text gives it: a non-empty string as it is, an
        -- integer as its digits, anything else null.
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
    ) end as key_value, count(*) as n
    from (
        select payload, metadata from cairnq_tasks
        where queue = (select :queue where ((select n from governed) + :want > (select amount from stored)))
          and status = 'running' and :scope_name is null
        union all
        select t.payload, t.metadata
        from (select 1 where :scope_name is not null and ((select n from governed) + :want > (select amount from stored))) as named
        cross join cairnq_tasks t
        where +t.name = :scope_name and t.status = 'running'
    ) as t
    group by 1
    having length(cast(key_value as blob)) <= 1000
),
full_keys as materialized (
    select key_value from running where n >= (select amount from stored)
),
due as materialized (
    -- A key over 1000 bytes is no key (as in running: it is never among the full keys).
    select id, priority, run_at_ms,
        case when length(cast(key_value as blob)) <= 1000 then key_value end as key_value
    from (
        select t.id, t.priority, t.run_at_ms,
            case when :key_path is null then '' else (
                -- The key text as limits.key_text gives it: a non-empty string as it
                -- is, an integer as its digits, anything else null.
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
            ) end as key_value
        from cairnq_tasks t
        where t.queue = :queue
          and t.status = 'queued'
          and (:names is null or t.name in (select value from json_each(:names)))
          and t.run_at_ms <= :now_ms
          and (
              :after_id is null
              or t.priority < :after_priority
              or (t.priority = :after_priority and (
                  t.run_at_ms > :after_run_at_ms
                  or (t.run_at_ms = :after_run_at_ms and t.id > :after_id)
              ))
          )
        order by t.priority desc, t.run_at_ms asc, t.id asc
    )
    where key_value is null or key_value not in (select key_value from full_keys)
    order by priority desc, run_at_ms asc, id asc
    limit :page
),
chosen as (
    select ranked.id, ranked.key_value, ranked.priority, ranked.run_at_ms
    from (
        select d.*, row_number() over (
            partition by d.key_value order by d.priority desc, d.run_at_ms asc, d.id asc
        ) as nth
        from due d
    ) as ranked
    left join running r on r.key_value = ranked.key_value
    where ranked.key_value is null
       or ranked.nth + coalesce(r.n, 0) <= (select amount from stored)
    order by ranked.priority desc, ranked.run_at_ms asc, ranked.id asc
    limit :want
),
figures as (
    select (select count(*) from due) as page_rows,
        (select count(*) from full_keys) as page_full_keys,
        (select n from governed) + :want <= (select amount from stored) as page_fits,
        last.priority as page_priority,
        last.run_at_ms as page_run_at_ms,
        last.id as page_id
    from (select 1) as one
    left join (
        select priority, run_at_ms, id
        from due
        order by priority asc, run_at_ms desc, id desc
        limit 1
    ) as last on true
)
-- The key as bytes: text a writer other than cairnq left invalid (a lone surrogate)
-- reaches the caller, who refuses the task, instead of failing the whole claim.
select f.*, c.id, cast(c.key_value as blob) as limit_key
from figures f
left join chosen c on true;
