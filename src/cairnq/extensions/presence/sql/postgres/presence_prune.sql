-- Deletes rows of workers not seen since before_ms (killed workers never delete their own).
-- Returns no rows.
-- params: before_ms
delete from cairnq_workers where last_seen_ms < :before_ms::bigint;
