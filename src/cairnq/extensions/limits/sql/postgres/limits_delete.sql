-- Deletes a limit by name, with its recorded keys and rate buckets.
-- Returns the deleted limit's name; zero rows when none had it.
-- params: name
delete from cairnq_limits where name = :name
returning name;
