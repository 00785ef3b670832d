-- Counts tasks whose status is the given one, stopping at cap, through the status index.
-- Returns one row (n), n <= cap: cap means at least cap such tasks exist.
-- params: status, cap
select count(*) as n
from (select 1 from cairnq_tasks where status = :status limit :cap) as matches;
