-- Whether the table of error text is there (cairnq_search_errors, x0026).
-- Returns one row: ready (1 or 0).
-- params: none
select exists (
    select 1 from sqlite_master where type = 'table' and name = 'cairnq_search_errors'
) as ready;
