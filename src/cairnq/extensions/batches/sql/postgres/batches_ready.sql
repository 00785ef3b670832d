-- Closed batches with every member's end recorded: their callbacks are due (a batch closed with no member left, or decided by no transaction that ended a member).
-- Returns (id) per such batch, at most limit of them.
-- params: limit
select b.id
from cairnq_batches as b
where b.state = 'closed'
  and not exists (
        select 1 from cairnq_batch_members as m where m.batch_id = b.id and m.outcome is null
    )
order by b.id
limit :limit::bigint;
