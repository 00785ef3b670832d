-- Whether the full-text index of error text is there (cairnq_search_errors, x0026).
-- Returns one row: ready (true or false).
-- params: none
select to_regclass('cairnq_search_errors') is not null as ready;
