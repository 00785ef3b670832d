-- Reads whether a cancel is pending on one task (a handler asking ctx.canceled()), taking no locks.
-- Returns (status, cancel_requested_at_ms), or zero rows when there is no such task.
-- params: id
select status, cancel_requested_at_ms from cairnq_tasks where id = :id;
