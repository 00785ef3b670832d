-- Resumes a queue or a task name: deletes its row of cairnq_pauses (x0007).
-- Returns the deleted row (scope, target, paused_at_ms, paused_by); zero rows when it was not paused.
-- params: scope, target
delete from cairnq_pauses
where scope = :scope::text and target = :target::text
returning scope, target, paused_at_ms, paused_by;
