-- Records a new batch (extension table cairnq_batches, x0017); state is 'open' or 'closed'.
-- Returns (created_at_ms) once.
-- params: id, state, callbacks, now_ms
with clock as materialized (
    select coalesce(:now_ms::bigint, floor(extract(epoch from clock_timestamp()) * 1000)::bigint) as now_ms
)
insert into cairnq_batches (id, state, callbacks, created_at_ms, closed_at_ms)
select :id::text, :state::text, :callbacks::text, clock.now_ms,
       case when :state::text = 'closed' then clock.now_ms end
from clock
returning created_at_ms;
