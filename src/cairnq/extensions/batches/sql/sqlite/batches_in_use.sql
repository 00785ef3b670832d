-- Whether any batch is open or closed (not done): while none is, no settlement has a member to record.
-- Returns (in_use) once, 1 or 0.
-- params: (none)
select case when exists (select 1 from cairnq_batches where state <> 'done') then 1 else 0 end as in_use;
