-- Give up the named lease if holder has it.
-- Returns the released row's name; zero rows means holder did not have it.
-- params: name, holder
delete from cairnq_locks where name = :name and holder = :holder
returning name
