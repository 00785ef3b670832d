-- Take or renew a periodic job's named lease for holder until now + ttl_ms (if free, expired or holder's) and record this run as last_run_ms.
-- Returns one row (holder) when held by holder afterwards; zero rows means another holder has it.
-- params: name, holder, now_ms, ttl_ms
insert into cairnq_named_leases (name, holder, until_ms, last_run_ms)
values (:name, :holder, :now_ms + :ttl_ms, :now_ms)
on conflict (name) do update
set holder = excluded.holder, until_ms = excluded.until_ms, last_run_ms = excluded.last_run_ms
where cairnq_named_leases.until_ms <= :now_ms or cairnq_named_leases.holder = excluded.holder
returning holder
