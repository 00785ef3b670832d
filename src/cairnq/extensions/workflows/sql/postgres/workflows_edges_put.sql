-- Records dependency edges (extension table cairnq_dependencies, x0008); rows is a JSON array of [task_id, depends_on_id, policy]. An edge already recorded is kept as it is.
-- Returns nothing.
-- params: rows
insert into cairnq_dependencies (task_id, depends_on_id, policy)
select r ->> 0, r ->> 1, r ->> 2
from jsonb_array_elements(:rows::jsonb) as r
on conflict (task_id, depends_on_id) do nothing;
