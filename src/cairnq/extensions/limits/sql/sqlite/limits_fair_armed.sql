-- Whether the fair share's insert trigger exists (it is dropped while no queue is shared).
-- Returns one row: armed (1 or 0).
-- params: none
select exists (
    select 1 from sqlite_master where type = 'trigger' and name = 'cairnq_fair_index'
) as armed;
