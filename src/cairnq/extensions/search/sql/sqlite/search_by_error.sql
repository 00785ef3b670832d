-- Tasks whose error holds every word of words (the FTS5 index cairnq_search_errors_fts, x0026) and every other filter, newest id first.
-- Returns task rows.
-- params: words (lowered words, space separated, a prefix one ending in *: an FTS5 query),
--   low_id, high_id (low_id <= task id < high_id), from_ms, until_ms (created_at_ms bounds;
--   null: none), status, queue, name, limit. It reads every matching task, then sorts.
select t.*
from cairnq_search_errors_fts as f
join cairnq_search_errors as e on e.id = f.rowid
join cairnq_tasks as t on t.id = e.task_id
where cairnq_search_errors_fts match :words
  and e.task_id >= :low_id
  and e.task_id < :high_id
  and (:from_ms is null or t.created_at_ms >= :from_ms)
  and (:until_ms is null or t.created_at_ms < :until_ms)
  and (:status is null or t.status = :status)
  and (:queue is null or t.queue = :queue)
  and (:name is null or t.name = :name)
order by e.task_id desc
limit :limit;
