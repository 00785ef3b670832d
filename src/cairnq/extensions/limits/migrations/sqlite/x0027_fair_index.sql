-- cairnq extension (not part of the reference protocol): the fair share's insert trigger
-- (x0022) exists only while the database has a fair share. On SQLite any trigger on
-- insert costs every insert statement, whatever its WHEN clause says, so a database that
-- shares no queue drops it here; storing a share creates it again (limits_fair_arm.sql)
-- and records the keys of the shared queues' tasks inserted without it.
drop trigger if exists cairnq_fair_index;
