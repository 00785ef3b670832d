-- Records dependency edges as satisfied, their dependency having succeeded (extension table cairnq_dependencies_satisfied, x0010); rows is a JSON array of [task_id, depends_on_id]. An edge already recorded is kept as it is.
-- Returns nothing.
-- params: rows
insert into cairnq_dependencies_satisfied (task_id, depends_on_id)
select json_extract(r.value, '$[0]'), json_extract(r.value, '$[1]')
from json_each(:rows) as r
where true
on conflict (task_id, depends_on_id) do nothing;
