-- Tasks whose error holds every word of words (a scan of cairnq_search_errors, x0026, the failed tasks' text) and every other filter, newest id first.
-- Returns task rows.
-- params: words (lowered words, space separated, each letters and digits only, a prefix one
--   ending in *), low_id, high_id (low_id <= task id < high_id), from_ms, until_ms
--   (created_at_ms bounds; null: none), status, queue, name, limit. A word matches where
--   the lowered text holds it with no ASCII letter or digit right before it, nor right
--   after it unless it ends in * (a glob of the word). It walks the error rows down from
--   high_id.
select t.*
from cairnq_search_errors as e
join cairnq_tasks as t on t.id = e.task_id
where e.task_id >= :low_id
  and e.task_id < :high_id
  and not exists (
      select 1
      from json_each('["' || replace(:words, ' ', '","') || '"]') as w
      where (' ' || lower(e.text) || ' ') not glob (
          '*[^0-9a-z]' || w.value
          || case when substr(w.value, -1) = '*' then '' else '[^0-9a-z]*' end
      )
  )
  and (:from_ms is null or t.created_at_ms >= :from_ms)
  and (:until_ms is null or t.created_at_ms < :until_ms)
  and (:status is null or t.status = :status)
  and (:queue is null or t.queue = :queue)
  and (:name is null or t.name = :name)
order by e.task_id desc
limit :limit;
