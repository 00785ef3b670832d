-- Locks the fair share of queue until the transaction ends: fair claims of one queue run one at a time, so the running counts each reads are exact.
-- Returns the share's queue; zero rows when the queue is not shared.
-- params: queue
select queue from cairnq_fair_shares where queue = :queue::text for update;
