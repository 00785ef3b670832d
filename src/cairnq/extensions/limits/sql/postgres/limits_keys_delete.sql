-- Forgets the keys recorded for one limit's claims (the limit is gone).
-- Returns nothing.
-- params: name
delete from cairnq_limit_keys where limit_name = :name;
