-- Counts tasks whose queue is the given one, stopping at cap, through the claim index.
-- Returns one row (n), n <= cap: cap means at least cap such tasks exist.
-- params: queue, cap
select count(*) as n
from (select 1 from cairnq_tasks where queue = :queue limit :cap) as matches;
