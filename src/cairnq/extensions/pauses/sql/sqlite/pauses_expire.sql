-- Deletes the pauses whose end (cairnq_pause_ends, x0017) has passed; their ends go with them.
-- Returns nothing.
-- params: now_ms
delete from cairnq_pauses
where exists (
    select 1 from cairnq_pause_ends e
    where e.scope = cairnq_pauses.scope and e.target = cairnq_pauses.target
      and e.resume_at_ms <= :now_ms
);
