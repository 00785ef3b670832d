-- Running tasks per key of one concurrency limit keyed by a JSON path (or by nothing), each task counted under the key its own JSON gives, whoever claimed it: the running tasks of queue target (scope 'queue') or of task name target in every queue (scope 'name'), keyed by the JSON path key_path into key_root (payload or metadata), or '' for every task when key_path is null. A task whose key cannot be computed or is over 1000 bytes counts for nothing (the claim refuses such a task).
-- Returns (key_value, running) for every key with a running task.
-- params: scope, target, key_root, key_path
select case when :key_path is null then '' else (
    -- The key text as limits.key_text gives it: a non-empty string as it is, an integer
    -- as its digits, anything else null.
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
) end as key_value, count(*) as running
from (
    select payload, metadata from cairnq_tasks
    where :scope = 'queue' and queue = :target and status = 'running'
    union all
    -- +name: the running tasks are found by status, not among every task ever kept under
    -- the name; the one-row gate on the left of the cross join (which SQLite keeps
    -- outermost) holds no row for a queue's limit, so nothing is read.
    select t.payload, t.metadata
    from (select 1 where :scope = 'name') as named
    cross join cairnq_tasks t
    where +t.name = :target and t.status = 'running'
) as t
group by 1
having length(cast(key_value as blob)) <= 1000;
