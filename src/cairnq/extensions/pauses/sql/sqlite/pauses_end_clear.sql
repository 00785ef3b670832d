-- Makes a pause last until it is resumed: deletes its end (cairnq_pause_ends, x0017).
-- Returns nothing.
-- params: scope, target
delete from cairnq_pause_ends
where scope = :scope and target = :target;
