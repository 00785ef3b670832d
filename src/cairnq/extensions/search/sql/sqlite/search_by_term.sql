-- Tasks holding one term (a tag or a declared field's value) and every other filter, newest id first.
-- Returns task rows.
-- params: field, value, more (a JSON array of [field, value] a task must hold too), low_id,
--   high_id (low_id <= task id < high_id), from_ms, until_ms (created_at_ms bounds; null:
--   none), status, queue, name, error (text the error's type or message holds, any case;
--   null: none), words (the words its error holds, as search_by_error takes and matches
--   them, in cairnq_search_errors, x0026; null: none), limit. It walks (field, value, task_id)
--   down from high_id.
with w (word, pattern) as materialized (
    select
        rtrim(value, '*'),
        '*[^0-9a-z]' || value
            || case when substr(value, -1) = '*' then '' else '[^0-9a-z]*' end
    from json_each('["' || replace(coalesce(:words, ''), ' ', '","') || '"]')
)
select t.*
from cairnq_search_terms as s
join cairnq_tasks as t on t.id = s.task_id
where s.field = :field
  and s.value = :value
  and s.task_id >= :low_id
  and s.task_id < :high_id
  and (:from_ms is null or t.created_at_ms >= :from_ms)
  and (:until_ms is null or t.created_at_ms < :until_ms)
  and (:status is null or t.status = :status)
  and (:queue is null or t.queue = :queue)
  and (:name is null or t.name = :name)
  and (
      :error is null
      or instr(
          lower(coalesce(json_extract(t.error, '$.type'), '') || ': '
                || coalesce(json_extract(t.error, '$.message'), '')),
          lower(:error)
      ) > 0
  )
  and (
      :words is null
      or exists (
          select 1
          from cairnq_search_errors as e
          where e.task_id = s.task_id
            and not exists (select 1 from w where instr(lower(e.text), w.word) = 0)
            and not exists (
                select 1 from w where (' ' || lower(e.text) || ' ') not glob w.pattern
            )
      )
  )
  and not exists (
      select 1
      from json_each(:more) as m
      where not exists (
          select 1
          from cairnq_search_terms as o
          where o.field = json_extract(m.value, '$[0]')
            and o.value = json_extract(m.value, '$[1]')
            and o.task_id = s.task_id
      )
  )
order by s.task_id desc
limit :limit;
