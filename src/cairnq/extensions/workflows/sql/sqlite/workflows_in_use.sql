-- Whether any task is parked: while none is, a settlement has no dependent to decide.
-- Returns (in_use) once, 1 or 0.
-- params: (none)
select case when exists (select 1 from cairnq_parked) then 1 else 0 end as in_use;
