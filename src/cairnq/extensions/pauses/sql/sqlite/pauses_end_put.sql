-- Sets when a pause ends by itself (cairnq_pause_ends, x0017): at at_ms, or for_ms after now.
-- Returns the end's row (scope, target, resume_at_ms).
-- params: scope, target, at_ms, for_ms, now_ms
insert into cairnq_pause_ends (scope, target, resume_at_ms)
values (:scope, :target, coalesce(:at_ms, :now_ms + :for_ms))
on conflict (scope, target) do update set resume_at_ms = excluded.resume_at_ms
returning scope, target, resume_at_ms;
