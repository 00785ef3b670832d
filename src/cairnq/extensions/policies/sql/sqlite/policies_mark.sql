-- Marks the task policies in use (cairnq_policies_use, x0020): from now + activation_ms on, unless a submit did before (then nothing changes: the row is never updated).
-- Returns nothing (read the row with policies_marked).
-- params: now_ms, activation_ms
insert into cairnq_policies_use (name, since_ms)
values ('policies', :now_ms + :activation_ms)
on conflict (name) do nothing;
