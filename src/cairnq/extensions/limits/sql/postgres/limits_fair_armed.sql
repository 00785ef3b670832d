-- Whether the fair share's insert trigger exists on cairnq_tasks (PostgreSQL keeps it: its function reads cairnq_fair_shares once per insert statement and stops there while no queue is shared).
-- Returns one row: armed.
-- params: none
select exists (
    select 1 from pg_catalog.pg_trigger
    where tgrelid = 'cairnq_tasks'::regclass and tgname = 'cairnq_fair_index'
) as armed;
