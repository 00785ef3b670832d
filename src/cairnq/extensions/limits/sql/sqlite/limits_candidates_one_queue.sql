-- One page of due queued tasks of queue (and names, unless null), read in the claim index's order after the keyset cursor (after_priority, after_run_at_ms, after_id; all null for the first page), leaving out tasks whose key (the JSON path key_path into key_root, payload or metadata) is among skip_keys (unless null).
-- Returns the task rows, in claim order.
-- params: queue, names, now_ms, after_priority, after_run_at_ms, after_id, key_root, key_path, skip_keys, limit
select *
from cairnq_tasks
where queue = :queue
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
          select case json_type(found.doc, :key_path)
              when 'text' then nullif(json_extract(found.doc, :key_path), '')
              -- Past 64 bits json_extract gives a float: the two-path form gives the
              -- JSON text [n,n], whose n is the integer as written.
              when 'integer' then (
                  select case when digits = '-0' then '0' else digits end
                  from (
                      select substr(pair, 2, instr(pair, ',') - 2) as digits
                      from (select json_extract(found.doc, :key_path, :key_path) as pair)
                  )
              )
          end
          from (
              select case when :key_root = 'metadata' then metadata else payload end as doc
          ) as found
      ) in (select value from json_each(:skip_keys))) is not true
  )
order by priority desc, run_at_ms asc, id asc
limit :limit;
