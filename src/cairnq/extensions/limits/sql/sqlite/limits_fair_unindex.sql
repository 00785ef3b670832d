-- Forgets the keys recorded for the tasks of queue (its share is gone or keys by another path).
-- Returns nothing.
-- params: queue
delete from cairnq_fair_tasks where queue = :queue;
