-- Tasks whose error holds every word of words (the GIN index on cairnq_search_errors, x0026) and every other filter, newest id first.
-- Returns task rows.
-- params: words (lowered words, space separated, a prefix one ending in *: made a tsquery
--   of the 'simple' configuration), low_id, high_id (low_id <= task id < high_id), from_ms,
--   until_ms (created_at_ms bounds; null: none), status, queue, name, limit. It reads
--   every matching task, then sorts.
select t.*
from cairnq_search_errors as e
join cairnq_tasks as t on t.id = e.task_id
where e.words @@ to_tsquery(
        'simple', replace(replace(:words::text, '*', ':*'), ' ', ' & ')
    )
  and e.task_id >= :low_id::text
  and e.task_id < :high_id::text
  and (:from_ms::bigint is null or t.created_at_ms >= :from_ms)
  and (:until_ms::bigint is null or t.created_at_ms < :until_ms)
  and (:status::text is null or t.status = :status)
  and (:queue::text is null or t.queue = :queue)
  and (:name::text is null or t.name = :name)
order by e.task_id desc
limit :limit::bigint;
