-- Tasks holding one term (a tag or a declared field's value) and every other filter, newest id first.
-- Returns task rows.
-- params: field, value, more (a JSON array of [field, value] a task must hold too), low_id,
--   high_id (low_id <= task id < high_id), from_ms, until_ms (created_at_ms bounds; null:
--   none), status, queue, name, error (text the error's type or message holds, any case;
--   null: none), words (the words its error holds, as search_by_error takes them, from
--   the full-text index, x0026; null: none), limit. It walks (field, value, task_id)
--   down from high_id.
select t.*
from cairnq_search_terms as s
join cairnq_tasks as t on t.id = s.task_id
where s.field = :field::text
  and s.value = :value::text
  and s.task_id >= :low_id::text
  and s.task_id < :high_id::text
  and (:from_ms::bigint is null or t.created_at_ms >= :from_ms)
  and (:until_ms::bigint is null or t.created_at_ms < :until_ms)
  and (:status::text is null or t.status = :status)
  and (:queue::text is null or t.queue = :queue)
  and (:name::text is null or t.name = :name)
  and (
      :error::text is null
      or strpos(
          lower(coalesce(t.error ->> 'type', '') || ': ' || coalesce(t.error ->> 'message', '')),
          lower(:error)
      ) > 0
  )
  and (
      :words::text is null
      or exists (
          select 1
          from cairnq_search_errors as e
          where e.task_id = s.task_id
            and e.words @@ to_tsquery(
                'simple', replace(replace(:words, '*', ':*'), ' ', ' & ')
            )
      )
  )
  and not exists (
      select 1
      from jsonb_array_elements(:more::jsonb) as m
      where not exists (
          select 1
          from cairnq_search_terms as o
          where o.field = m ->> 0
            and o.value = m ->> 1
            and o.task_id = s.task_id
      )
  )
order by s.task_id desc
limit :limit::bigint;
