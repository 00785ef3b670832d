-- Whether the full-text index of error text is there (cairnq_search_errors_fts, x0026; a SQLite without FTS5 skipped it).
-- Returns one row: ready (1 or 0).
-- params: none
select exists (
    select 1 from sqlite_master where type = 'table' and name = 'cairnq_search_errors_fts'
) as ready;
