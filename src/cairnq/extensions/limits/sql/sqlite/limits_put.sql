-- Stores a limit (extension table cairnq_limits, x0006), replacing the definition of one of that name.
-- Returns the stored row.
-- params: name, scope, target, key_path, kind, amount, period_ms, burst, source, now_ms
insert into cairnq_limits (name, scope, target, key_path, kind, amount, period_ms, burst, source, updated_at_ms)
values (:name, :scope, :target, :key_path, :kind, :amount, :period_ms, :burst, :source, :now_ms)
on conflict (name) do update set
    scope = excluded.scope, target = excluded.target, key_path = excluded.key_path,
    kind = excluded.kind, amount = excluded.amount, period_ms = excluded.period_ms,
    burst = excluded.burst, source = excluded.source, updated_at_ms = excluded.updated_at_ms
returning name, scope, target, key_path, kind, amount, period_ms, burst, source, updated_at_ms;
