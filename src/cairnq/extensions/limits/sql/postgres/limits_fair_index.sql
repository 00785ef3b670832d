-- Records the key of every queued or running task of queue, by the fair share's key path (key_root, key_path), for a share just declared or changed; tasks inserted later are recorded by the trigger of x0022.
-- Returns nothing.
-- params: queue, key_root, key_path
insert into cairnq_fair_tasks (task_id, queue, key_value, priority, run_at_ms)
select t.id, t.queue, k.value, t.priority, t.run_at_ms
from cairnq_tasks t
cross join lateral (
    -- The key text as limits.key_text gives it: a non-empty string as it is, an integer
    -- as its digits, anything else null (the task is not shared).
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
) as k
where t.queue = :queue::text
  and t.status in ('queued', 'running')
  and k.value is not null
  and octet_length(k.value) <= 1000
on conflict (task_id) do nothing;
