-- One page of due queued tasks of the listed queues (and names, unless null) after the keyset cursor (after_priority, after_run_at_ms, after_id; all null for the first page), leaving out tasks whose key (the JSON path key_path into key_root, payload or metadata) is among skip_keys (unless null).
-- Returns the task rows, in claim order.
-- params: queues, names, now_ms, after_priority, after_run_at_ms, after_id, key_root, key_path, skip_keys, limit
select *
from cairnq_tasks
where queue in (select value from json_each(:queues))
  and status = 'queued'
  and (:names is null or name in (select value from json_each(:names)))
  and run_at_ms <= :now_ms
  and (
      :after_id is null
      or priority < :after_priority
      or (priority = :after_priority and (
          run_at_ms > :after_run_at_ms or (run_at_ms = :after_run_at_ms and id > :after_id)
      ))
  )
  and (
      :skip_keys is null
      -- The key text as limits.key_text gives it: a non-empty string as it is, an
      -- integer as its digits, anything else null (it matches no key).
      or ((
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
      ) in (select value from json_each(:skip_keys))) is not true
  )
order by priority desc, run_at_ms asc, id asc
limit :limit;
