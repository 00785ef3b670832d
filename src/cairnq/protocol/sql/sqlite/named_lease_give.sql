-- End a periodic job's named lease now if holder has it, so another process takes it over at its next turn (last_run_ms stays).
-- Returns the row's name; zero rows means holder did not have it.
-- params: name, holder, now_ms
update cairnq_named_leases set until_ms = :now_ms
where name = :name and holder = :holder and until_ms > :now_ms
returning name
