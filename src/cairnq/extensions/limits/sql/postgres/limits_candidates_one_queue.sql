-- One page of due queued tasks of queue (and names, unless null), read in the claim index's order after the keyset cursor (after_priority, after_run_at_ms, after_id; all null for the first page), leaving out tasks whose key (the JSON path key_path into key_root, payload or metadata) is among skip_keys (unless null); locks the rows it returns, skipping rows locked elsewhere.
-- Returns the task rows, in claim order.
-- params: queue, names, now_ms, after_priority, after_run_at_ms, after_id, key_root, key_path, skip_keys, limit
select *
from cairnq_tasks
where queue = :queue::text
  and status = 'queued'
  and (:names::text[] is null or name = any(:names::text[]))
  and run_at_ms <= :now_ms::bigint
  and (
      :after_id::text is null
      or priority < :after_priority::integer
      or (priority = :after_priority::integer and (
          run_at_ms > :after_run_at_ms::bigint
          or (run_at_ms = :after_run_at_ms::bigint and id > :after_id::text)
      ))
  )
  and (
      :skip_keys::text[] is null
      -- The key text as limits.key_text gives it: a non-empty string as it is, an
      -- integer as its digits, anything else null (it matches no key). A jsonb number
      -- prints without an exponent, so one without a point is an integer. The strict
      -- path reads object members only, as Python does.
      or ((
          select case jsonb_typeof(found.value)
              when 'string' then nullif(found.value #>> '{}', '')
              when 'number' then case
                  when found.value::text ~ '^-?[0-9]+$' then found.value::text
              end
          end
          from (
              select jsonb_path_query_first(
                  case when :key_root::text = 'metadata' then metadata else payload end,
                  ('strict ' || :key_path::text)::jsonpath,
                  '{}'::jsonb,
                  true
              ) as value
          ) as found
      ) = any(:skip_keys::text[])) is not true
  )
order by priority desc, run_at_ms asc, id asc
limit :limit::bigint
for update skip locked;
