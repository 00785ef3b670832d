-- Records a submit's tags and declared search fields (cairnq_search_terms, x0021).
-- Returns nothing.
-- params: rows (a JSON array of [task_id, field, value]; a tag's field is '#')
insert or ignore into cairnq_search_terms (field, value, task_id)
select json_extract(r.value, '$[1]'), json_extract(r.value, '$[2]'), json_extract(r.value, '$[0]')
from json_each(:rows) as r;
