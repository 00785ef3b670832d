-- Records the outcome of members that just ended; rows is a JSON array of [task_id, status]. Only a member whose outcome is not recorded yet changes: the first end recorded stays.
-- Returns (batch_id) per member recorded.
-- params: rows, now_ms
update cairnq_batch_members
set outcome = (select json_extract(r.value, '$[1]') from json_each(:rows) as r
               where json_extract(r.value, '$[0]') = cairnq_batch_members.task_id),
    ended_at_ms = :now_ms
where outcome is null
  and task_id in (select json_extract(r.value, '$[0]') from json_each(:rows) as r)
returning batch_id;
