-- Undoes defer: each task of ids still queued and due at run_at_ms becomes due its delay (delays_ms, one per id) after now.
-- Returns the updated rows.
-- params: ids, delays_ms, run_at_ms, now_ms
with wanted as (
    -- The i-th delay by its path: a join on json_each's keys reads the list once per id
    -- (json_extract reuses its parse of the list within the statement).
    select i.value as id, json_extract(:delays_ms, '$[' || i.key || ']') as delay_ms
    from json_each(:ids) as i
)
update cairnq_tasks
set run_at_ms = :now_ms + (select delay_ms from wanted where wanted.id = cairnq_tasks.id),
    updated_at_ms = :now_ms
where id in (select id from wanted) and status = 'queued'
  and run_at_ms = :run_at_ms
returning *;
