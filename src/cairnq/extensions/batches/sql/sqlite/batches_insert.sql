-- Records a new batch (extension table cairnq_batches, x0017); state is 'open' or 'closed'.
-- Returns (created_at_ms) once.
-- params: id, state, callbacks, now_ms
insert into cairnq_batches (id, state, callbacks, created_at_ms, closed_at_ms)
values (:id, :state, :callbacks, :now_ms, case when :state = 'closed' then :now_ms end)
returning created_at_ms;
