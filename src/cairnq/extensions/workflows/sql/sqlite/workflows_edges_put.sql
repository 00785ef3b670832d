-- Records dependency edges (extension table cairnq_dependencies, x0008); rows is a JSON array of [task_id, depends_on_id, policy]. An edge already recorded is kept as it is.
-- Returns nothing.
-- params: rows
insert into cairnq_dependencies (task_id, depends_on_id, policy)
select json_extract(r.value, '$[0]'), json_extract(r.value, '$[1]'), json_extract(r.value, '$[2]')
from json_each(:rows) as r
where true
on conflict (task_id, depends_on_id) do nothing;
