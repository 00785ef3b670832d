-- One page of due queued tasks of the listed queues (and names, unless null) after the keyset cursor (after_priority, after_run_at_ms, after_id; all null for the first page); locks the rows it returns, skipping rows locked elsewhere. With limit_name, each row carries its key under that limit (limit_key: the JSON path key_path into key_root, payload or metadata, or '' when key_path is null; null when the key rule refuses the value), the key's running count (limit_running) and the limit's stored amount (limit_amount); with sieve, rows whose key is at its limit, or among skip_keys (keys the claim filled itself), are left out.
-- Returns the task rows with limit_key, limit_running and limit_amount, in claim order.
-- params: queues, names, now_ms, after_priority, after_run_at_ms, after_id, limit_name, key_root, key_path, sieve, skip_keys, limit
select t.*, k.key_text as limit_key,
    coalesce((
        select c.running from cairnq_limit_counts c
        where c.limit_name = :limit_name::text and c.key_value = k.key_text
    ), 0) as limit_running,
    (select l.amount from cairnq_limits l where l.name = :limit_name::text) as limit_amount
from cairnq_tasks t
cross join lateral (
    select case
        when :limit_name::text is null then null
        when :key_path::text is null then ''
        -- The key text as limits.key_text gives it: a non-empty string as it is, an
        -- integer as its digits, anything else null (it matches no key). A jsonb number
        -- prints without an exponent, so one without a point is an integer. The strict
        -- path reads object members only, as Python does.
        else (
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
        )
    end as key_text
) as k
where t.queue = any(:queues::text[])
  and t.status = 'queued'
  and (:names::text[] is null or t.name = any(:names::text[]))
  and t.run_at_ms <= coalesce(
      :now_ms::bigint, floor(extract(epoch from clock_timestamp()) * 1000)::bigint
  )
  and (
      :after_id::text is null
      or t.priority < :after_priority::integer
      or (t.priority = :after_priority::integer and (
          t.run_at_ms > :after_run_at_ms::bigint
          or (t.run_at_ms = :after_run_at_ms::bigint and t.id > :after_id::text)
      ))
  )
  and (
      not :sieve::boolean
      or k.key_text is null
      or (
          not (k.key_text = any(coalesce(:skip_keys::text[], '{}')))
          and not exists (
              select 1 from cairnq_limit_counts c
              join cairnq_limits l on l.name = c.limit_name
              where c.limit_name = :limit_name::text and c.key_value = k.key_text
                and c.running >= l.amount
          )
      )
  )
order by t.priority desc, t.run_at_ms asc, t.id asc
limit :limit::bigint
for update of t skip locked;
