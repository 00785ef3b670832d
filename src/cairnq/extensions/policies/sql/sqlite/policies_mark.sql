-- Marks the task policies in use (cairnq_policies_use, x0017): from now + activation_ms on, unless a submit did before.
-- Returns one row: since_ms (when they are in use) and now_ms (this statement's clock).
-- params: now_ms, activation_ms
insert into cairnq_policies_use (name, since_ms)
values ('policies', :now_ms + :activation_ms)
on conflict (name) do update set name = excluded.name
returning since_ms, :now_ms as now_ms;
