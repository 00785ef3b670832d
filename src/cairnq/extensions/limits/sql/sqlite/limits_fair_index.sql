-- Records the key of every queued or running task of queue, by the fair share's key path (key_root, key_path), for a share just declared or changed; tasks inserted later are recorded by the trigger of x0022.
-- Returns nothing.
-- params: queue, key_root, key_path
insert or ignore into cairnq_fair_tasks (task_id, queue, key_value, priority, run_at_ms)
select id, queue, key_value, priority, run_at_ms
from (
    select t.id, t.queue, t.priority, t.run_at_ms, (
        -- The key text as limits.key_text gives it: a non-empty string as it is, an
        -- integer as its digits, anything else null (the task is not shared).
        select case when json_valid(found.doc) then (
            case json_type(found.doc, :key_path)
                when 'text' then nullif(json_extract(found.doc, :key_path), '')
                when 'integer' then (
                    select case when digits = '-0' then '0' else digits end
                    from (
                        select substr(pair, 2, instr(pair, ',') - 2) as digits
                        from (select json_extract(found.doc, :key_path, :key_path) as pair)
                    )
                )
            end
        ) end
        from (
            select case when :key_root = 'metadata' then t.metadata else t.payload end as doc
        ) as found
    ) as key_value
    from cairnq_tasks t
    where t.queue = :queue
      and t.status in ('queued', 'running')
)
where key_value is not null
  and length(cast(key_value as blob)) <= 1000;
