-- How many members of each batch of ids have each outcome (null: not ended yet).
-- Returns (batch_id, outcome, n) per batch and outcome present.
-- params: ids
select batch_id, outcome, count(*) as n
from cairnq_batch_members
where batch_id in (select value from json_each(:ids))
group by batch_id, outcome;
