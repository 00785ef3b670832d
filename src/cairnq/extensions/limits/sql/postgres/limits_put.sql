-- Stores a limit (extension table cairnq_limits, x0006), replacing the definition of one of that name.
-- Returns the stored row.
-- params: name, scope, target, key_path, kind, amount, period_ms, burst, source, now_ms
with clock as materialized (
    select coalesce(:now_ms::bigint, floor(extract(epoch from clock_timestamp()) * 1000)::bigint) as now_ms
)
insert into cairnq_limits (name, scope, target, key_path, kind, amount, period_ms, burst, source, updated_at_ms)
select :name::text, :scope::text, :target::text, :key_path::text, :kind::text, :amount::bigint,
    :period_ms::bigint, :burst::bigint, :source::text, clock.now_ms
from clock
on conflict (name) do update set
    scope = excluded.scope, target = excluded.target, key_path = excluded.key_path,
    kind = excluded.kind, amount = excluded.amount, period_ms = excluded.period_ms,
    burst = excluded.burst, source = excluded.source, updated_at_ms = excluded.updated_at_ms
returning name, scope, target, key_path, kind, amount, period_ms, burst, source, updated_at_ms;
