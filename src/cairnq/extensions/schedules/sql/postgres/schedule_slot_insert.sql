-- Records the decision on one slot (or on a range of skipped slots starting at slot_ms), unless that slot is already recorded: the primary key makes a slot's decision once only.
-- Returns (slot_ms) when recorded; zero rows when the slot was already decided.
-- params: schedule, slot_ms, through_ms, slots, outcome, now_ms
insert into cairnq_schedule_slots (schedule, slot_ms, through_ms, slots, outcome, task_id, recorded_at_ms)
values (:schedule::text, :slot_ms::bigint, :through_ms::bigint, :slots::bigint, :outcome::text, null,
    :now_ms::bigint)
on conflict (schedule, slot_ms) do nothing
returning slot_ms
