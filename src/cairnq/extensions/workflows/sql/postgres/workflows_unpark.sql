-- Forgets decided parked tasks (their dependency edges stay, for ctx.dependencies and the tree).
-- Returns nothing.
-- params: ids
delete from cairnq_parked where task_id = any(:ids::text[]);
