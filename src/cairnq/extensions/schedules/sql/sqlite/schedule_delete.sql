-- Deletes a schedule (its slots are deleted by schedule_slots_delete in the same transaction).
-- Returns (name) when a schedule was deleted.
-- params: name
delete from cairnq_schedules
where name = :name
returning name
