-- Forgets one limit's running counts (the limit is gone).
-- Returns nothing.
-- params: name
delete from cairnq_limit_counts where limit_name = :name;
