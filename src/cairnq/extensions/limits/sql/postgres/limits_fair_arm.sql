-- Creates the fair share's insert trigger again when it is missing (the migration x0022_fair_share.sql creates it, and PostgreSQL keeps it).
-- Returns nothing.
-- params: none
create or replace trigger cairnq_fair_index
    after insert on cairnq_tasks
    referencing new table as added
    for each statement
    execute function cairnq_fair_index();
