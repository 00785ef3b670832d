-- Deletes the record of a schedule's slots.
-- Returns no rows.
-- params: name
delete from cairnq_schedule_slots
where schedule = :name
