-- Inserts many queued tasks in one statement; rows is a JSON array of [id, name, queue, payload text, metadata text, max_attempts, priority, delay_ms, parent_id, root_id, correlation_id].
-- Returns (id, run_at_ms, created_at_ms) per inserted task.
-- params: rows, now_ms
insert into cairnq_tasks (
    id, name, queue, status, payload, metadata, attempt, max_attempts, priority,
    run_at_ms, parent_id, root_id, correlation_id, created_at_ms, updated_at_ms
)
select json_extract(value, '$[0]'), json_extract(value, '$[1]'), json_extract(value, '$[2]'),
       'queued', json_extract(value, '$[3]'), json_extract(value, '$[4]'), 0,
       json_extract(value, '$[5]'), json_extract(value, '$[6]'),
       :now_ms + json_extract(value, '$[7]'), json_extract(value, '$[8]'),
       json_extract(value, '$[9]'), json_extract(value, '$[10]'), :now_ms, :now_ms
from json_each(:rows)
where true
returning id, run_at_ms, created_at_ms;
