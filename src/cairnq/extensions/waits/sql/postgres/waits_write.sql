-- Writes a wait of an owned attempt's run: begins it (state waiting, wake_at_ms and parked_run_at_ms as given) or ends it (delivered, timed_out, slept); once written, a wait's wake_at_ms and parked_run_at_ms stay, and only a waiting wait changes. The task's row is share-locked, so recovery cannot move it meanwhile.
-- Returns the wait's row (state, wake_at_ms, parked_run_at_ms, message_seq, payload), or zero rows when the caller no longer owns the attempt (lost lease) or the wait ended already.
-- params: id, attempt, worker_id, now_ms, name, kind, key, state, wake_at_ms, parked_run_at_ms, message_seq, payload
with clock as materialized (
    select :now_ms::bigint as now_ms
),
owned as materialized (
    select id
    from cairnq_tasks
    where id = :id::text and status = 'running' and worker_id = :worker_id::text
      and attempt = :attempt::integer and lease_until_ms > (select now_ms from clock)
    for share
)
insert into cairnq_waits (task_id, name, kind, event_key, state, wake_at_ms, parked_run_at_ms,
                          message_seq, payload, created_at_ms, ended_at_ms)
select id, :name::text, :kind::text, :key::text, :state::text, :wake_at_ms::bigint,
       :parked_run_at_ms::bigint, :message_seq::bigint, :payload::text, :now_ms::bigint,
       case when :state::text = 'waiting' then null else :now_ms::bigint end
from owned
on conflict (task_id, name) do update
set state = excluded.state,
    message_seq = excluded.message_seq,
    payload = excluded.payload,
    ended_at_ms = excluded.ended_at_ms
where cairnq_waits.state = 'waiting'
returning state, wake_at_ms, parked_run_at_ms, message_seq, payload;
