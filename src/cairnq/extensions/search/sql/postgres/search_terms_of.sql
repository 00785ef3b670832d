-- A task's tags and declared search fields (cairnq_search_terms, x0021).
-- Returns field, value rows (a tag's field is '#'), in field then value order.
-- params: id
select field, value
from cairnq_search_terms
where task_id = :id::text
order by field, value;
