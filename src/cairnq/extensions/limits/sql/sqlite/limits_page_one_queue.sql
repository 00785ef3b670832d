-- One page of due queued tasks of one queue (and names, unless null) after the keyset cursor (after_priority, after_run_at_ms, after_id; all null for the first page). With limit_name, each row carries its key under that limit (limit_key: the JSON path key_path into key_root, payload or metadata, or '' when key_path is null; null when the key rule refuses the value), the key's running count (limit_running) and the limit's stored amount (limit_amount); with sieve, rows whose key is at its limit, or among skip_keys (keys the claim filled itself), are left out.
-- Returns the task rows with limit_key, limit_running and limit_amount, in claim order (the claim index serves it in that order).
-- params: queue, names, now_ms, after_priority, after_run_at_ms, after_id, limit_name, key_root, key_path, sieve, skip_keys, limit
select t.*, case
        when :limit_name is null then null
        when :key_path is null then ''
        -- The key text as limits.key_text gives it: a non-empty string as it is, an
        -- integer as its digits, anything else null (it matches no key).
        else (
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
                select case when :key_root = 'metadata' then t.metadata else t.payload end as doc
            ) as found
        )
    end as limit_key,
    coalesce((
        select c.running from cairnq_limit_counts c
        where c.limit_name = :limit_name and c.key_value = case
            when :limit_name is null then null
            when :key_path is null then ''
            -- The key text as limits.key_text gives it: a non-empty string as it is, an
            -- integer as its digits, anything else null (it matches no key).
            else (
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
                    select case when :key_root = 'metadata' then t.metadata else t.payload end as doc
                ) as found
            )
        end
    ), 0) as limit_running,
    (select l.amount from cairnq_limits l where l.name = :limit_name) as limit_amount
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
  and (
      not :sieve
      or (
          select k.key_text is null or (
              k.key_text not in (select value from json_each(coalesce(:skip_keys, '[]')))
              and not exists (
                  select 1 from cairnq_limit_counts c
                  join cairnq_limits l on l.name = c.limit_name
                  where c.limit_name = :limit_name and c.key_value = k.key_text
                    and c.running >= l.amount
              )
          )
          from (select case
        when :limit_name is null then null
        when :key_path is null then ''
        -- The key text as limits.key_text gives it: a non-empty string as it is, an
        -- integer as its digits, anything else null (it matches no key).
        else (
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
                select case when :key_root = 'metadata' then t.metadata else t.payload end as doc
            ) as found
        )
    end as key_text) as k
      )
  )
order by t.priority desc, t.run_at_ms asc, t.id asc
limit :limit;
