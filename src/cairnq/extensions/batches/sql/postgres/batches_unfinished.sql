-- Which batches of ids still have a member whose end is not recorded.
-- Returns (id) per such batch.
-- params: ids
select j.id
from unnest(:ids::text[]) as j(id)
where exists (
    select 1 from cairnq_batch_members as m where m.batch_id = j.id and m.outcome is null
);
