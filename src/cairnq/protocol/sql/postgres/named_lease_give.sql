-- End a periodic job's named lease now if holder has it, so another process takes it over at its next turn (last_run_ms stays).
-- Returns the row's name; zero rows means holder did not have it.
-- params: name, holder, now_ms
with clock as materialized (
    select coalesce(:now_ms::bigint, floor(extract(epoch from clock_timestamp()) * 1000)::bigint) as now_ms
)
update cairnq_named_leases set until_ms = (select now_ms from clock)
where name = :name::text and holder = :holder::text and until_ms > (select now_ms from clock)
returning name
