-- Running tasks per key of one concurrency limit keyed by a JSON path (or by nothing), each task counted under the key its own JSON gives, whoever claimed it: the running tasks of queue target (scope 'queue') or of task name target in every queue (scope 'name'), keyed by the JSON path key_path into key_root (payload or metadata), or '' for every task when key_path is null. A task whose key cannot be computed or is over 1000 bytes counts for nothing (the claim refuses such a task).
-- Returns (key_value, running) for every key with a running task.
-- params: scope, target, key_root, key_path
select key.value as key_value, count(*) as running
from (
    select t.payload, t.metadata from cairnq_tasks t
    where :scope::text = 'queue' and t.queue = :target::text and t.status = 'running'
    union all
    select t.payload, t.metadata from cairnq_tasks t
    -- The name as an expression: the running tasks are found by status, not among every
    -- task ever kept under the name.
    where :scope::text = 'name' and (t.name || '') = :target::text and t.status = 'running'
) as t
cross join lateral (
    -- The key text as limits.key_text gives it: a non-empty string as it is, an integer
    -- as its digits, anything else null. A jsonb number prints without an exponent, so
    -- one without a point is an integer. The strict path reads object members only, as
    -- Python does.
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
where octet_length(key.value) <= 1000
group by key.value;
