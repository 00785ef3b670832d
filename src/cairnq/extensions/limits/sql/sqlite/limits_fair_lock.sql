-- Reads the fair share of queue inside the write transaction (which SQLite runs one at a time, so fair claims of one queue are serialised by it).
-- Returns the share's queue; zero rows when the queue is not shared.
-- params: queue
select queue from cairnq_fair_shares where queue = :queue;
