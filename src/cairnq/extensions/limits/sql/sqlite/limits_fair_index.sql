-- Records the key of every queued or running task of queue, by the fair share's key path (key_root, key_path), for a share just declared or changed; tasks inserted later are recorded by the trigger of x0022.
-- Returns nothing.
-- params: queue, key_root, key_path
insert or ignore into cairnq_fair_tasks (task_id, queue, key_value, priority, run_at_ms)
select id, queue, key_value, priority, run_at_ms
from (
    select t.id, t.queue, t.priority, t.run_at_ms,
        -- The key text as limits.key_text gives it: a non-empty string as it is, an
        -- integer as its digits, anything else null (the task is not shared).
        case when json_valid(iif(:key_root = 'metadata', t.metadata, t.payload)) then
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
        end as key_value
    from cairnq_tasks t
    where t.queue = :queue
      and t.status in ('queued', 'running')
)
where key_value is not null
  and length(cast(key_value as blob)) <= 1000;
