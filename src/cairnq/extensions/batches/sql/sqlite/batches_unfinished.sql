-- Which batches of ids still have a member whose end is not recorded.
-- Returns (id) per such batch.
-- params: ids
select j.value as id
from json_each(:ids) as j
where exists (
    select 1 from cairnq_batch_members as m where m.batch_id = j.value and m.outcome is null
);
