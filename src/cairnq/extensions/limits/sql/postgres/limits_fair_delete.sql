-- Removes the fair share of queue; its tasks' keys go with it (limits_fair_unindex).
-- Returns the removed share's queue; zero rows when none had it.
-- params: queue
delete from cairnq_fair_shares where queue = :queue::text
returning queue;
