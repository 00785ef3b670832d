-- Marks the task policies in use (cairnq_policies_use, x0020): from now + activation_ms on, unless a submit did before (then nothing changes: the row is never updated, so no submit waits on another's lock of it).
-- Returns nothing (read the row with policies_marked).
-- params: now_ms, activation_ms
insert into cairnq_policies_use (name, since_ms)
values ('policies', coalesce(:now_ms::bigint, floor(extract(epoch from clock_timestamp()) * 1000)::bigint) + :activation_ms::bigint)
on conflict (name) do nothing;
