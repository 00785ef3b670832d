-- Pauses a queue or a task name (extension table cairnq_pauses, x0007) unless it is paused already.
-- Returns the new row (scope, target, paused_at_ms, paused_by); zero rows when it was paused already.
-- params: scope, target, now_ms, paused_by
insert into cairnq_pauses (scope, target, paused_at_ms, paused_by)
values (:scope, :target, :now_ms, :paused_by)
on conflict (scope, target) do nothing
returning scope, target, paused_at_ms, paused_by;
