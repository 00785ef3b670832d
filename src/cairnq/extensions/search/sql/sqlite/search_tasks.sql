-- Tasks matching every given filter, newest id first, with no term to start from.
-- Returns task rows.
-- params: low_id, high_id (low_id <= task id < high_id), from_ms, until_ms (created_at_ms
--   bounds; null: none), status, queue, name, error (text the error's type or message
--   holds, any case; null: none), limit. It walks the task ids down from high_id.
select t.*
from cairnq_tasks as t
where t.id >= :low_id
  and t.id < :high_id
  and (:from_ms is null or t.created_at_ms >= :from_ms)
  and (:until_ms is null or t.created_at_ms < :until_ms)
  and (:status is null or t.status = :status)
  and (:queue is null or t.queue = :queue)
  and (:name is null or t.name = :name)
  and (
      :error is null
      or (
          t.error is not null
          and instr(
              lower(coalesce(json_extract(t.error, '$.type'), '') || ': '
                    || coalesce(json_extract(t.error, '$.message'), '')),
              lower(:error)
          ) > 0
      )
  )
order by t.id desc
limit :limit;
