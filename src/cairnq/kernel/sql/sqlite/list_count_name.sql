-- Counts tasks whose name is the given one, stopping at cap, through the name index.
-- Returns one row (n), n <= cap: cap means at least cap such tasks exist.
-- params: name, cap
select count(*) as n
from (select 1 from cairnq_tasks where name = :name limit :cap) as matches;
