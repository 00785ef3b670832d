-- Marks the task policies in use (cairnq_policies_use, x0020): from now + activation_ms on, unless a submit did before (then nothing changes: the row is never updated).
-- Returns one row when it wrote the marker: since_ms and now_ms; none when it was there.
-- params: now_ms, activation_ms
insert into cairnq_policies_use (name, since_ms)
values ('policies', :now_ms + :activation_ms)
on conflict (name) do nothing
returning since_ms, :now_ms as now_ms;
