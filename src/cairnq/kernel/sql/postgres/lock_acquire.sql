-- Take or renew the named lease for holder until now + ttl_ms, if it is free, expired or already holder's.
-- Returns one row (holder) when held by holder afterwards; zero rows means another holder has it.
-- params: name, holder, now_ms, ttl_ms
with clock as materialized (
    select coalesce(:now_ms::bigint, floor(extract(epoch from clock_timestamp()) * 1000)::bigint) as now_ms
)
insert into cairnq_locks (name, holder, until_ms)
values (:name::text, :holder::text, (select now_ms from clock) + :ttl_ms::bigint)
on conflict (name) do update
set holder = excluded.holder, until_ms = excluded.until_ms
where cairnq_locks.until_ms <= (select now_ms from clock) or cairnq_locks.holder = excluded.holder
returning holder
