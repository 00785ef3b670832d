-- Tasks whose error holds every word of words (a scan of cairnq_search_errors, x0026, the failed tasks' text) and every other filter, newest id first.
-- Returns task rows.
-- params: words (lowered words, space separated, each letters and digits only, a prefix one
--   ending in *), low_id, high_id (low_id <= task id < high_id), from_ms, until_ms
--   (created_at_ms bounds; null: none), status, queue, name, limit. A word matches where
--   the lowered text holds it with no ASCII letter or digit right before it, nor right
--   after it unless it ends in * (a glob of the word; a row without every word as a
--   substring is passed over before any glob). It walks the error rows down from high_id.
with w (word, pattern) as materialized (
    select
        rtrim(value, '*'),
        '*[^0-9a-z]' || value
            || case when substr(value, -1) = '*' then '' else '[^0-9a-z]*' end
    from json_each('["' || replace(:words, ' ', '","') || '"]')
)
select t.*
from cairnq_search_errors as e
join cairnq_tasks as t on t.id = e.task_id
where e.task_id >= :low_id
  and e.task_id < :high_id
  and not exists (select 1 from w where instr(lower(e.text), w.word) = 0)
  and not exists (select 1 from w where (' ' || lower(e.text) || ' ') not glob w.pattern)
  and (:from_ms is null or t.created_at_ms >= :from_ms)
  and (:until_ms is null or t.created_at_ms < :until_ms)
  and (:status is null or t.status = :status)
  and (:queue is null or t.queue = :queue)
  and (:name is null or t.name = :name)
order by e.task_id desc
limit :limit;
