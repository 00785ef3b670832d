-- Records a submit's tags and declared search fields (cairnq_search_terms, x0021).
-- Returns nothing.
-- params: rows (a JSON array of [task_id, field, value]; a tag's field is '#')
insert into cairnq_search_terms (field, value, task_id)
select r ->> 1, r ->> 2, r ->> 0
from jsonb_array_elements(:rows::jsonb) as r
on conflict do nothing;
