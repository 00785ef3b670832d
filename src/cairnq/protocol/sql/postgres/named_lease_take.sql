-- Take or renew a periodic job's named lease for holder until now + ttl_ms (if free, expired or holder's) and record this run as last_run_ms.
-- Returns one row (holder) when held by holder afterwards; zero rows means another holder has it.
-- params: name, holder, now_ms, ttl_ms
with clock as materialized (
    select coalesce(:now_ms::bigint, floor(extract(epoch from clock_timestamp()) * 1000)::bigint) as now_ms
)
insert into cairnq_named_leases (name, holder, until_ms, last_run_ms)
values (:name::text, :holder::text, (select now_ms from clock) + :ttl_ms::bigint, (select now_ms from clock))
on conflict (name) do update
set holder = excluded.holder, until_ms = excluded.until_ms, last_run_ms = excluded.last_run_ms
where cairnq_named_leases.until_ms <= (select now_ms from clock)
    or cairnq_named_leases.holder = excluded.holder
returning holder
