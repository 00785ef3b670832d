-- Forgets one limit's rate buckets (the limit is gone, or redefined).
-- Returns nothing.
-- params: name
delete from cairnq_rate_buckets where limit_name = :name;
