-- Keeps the record of a schedule's newest keep slot decisions and deletes older ones (the cursor, not this record, keeps decided slots from being decided again).
-- Returns no rows.
-- params: name, keep
delete from cairnq_schedule_slots
where schedule = :name::text
    and slot_ms < (
        select slot_ms from cairnq_schedule_slots
        where schedule = :name::text
        order by slot_ms desc
        limit 1 offset :keep::integer
    )
