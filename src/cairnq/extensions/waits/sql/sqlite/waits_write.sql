-- Writes a wait of an owned attempt's run: begins it (state waiting, wake_at_ms and parked_run_at_ms as given) or ends it (delivered, timed_out, slept); once written, a wait's wake_at_ms and parked_run_at_ms stay, and only a waiting wait changes.
-- Returns the wait's row (state, wake_at_ms, parked_run_at_ms, message_seq, payload), or zero rows when the caller no longer owns the attempt (lost lease) or the wait ended already.
-- params: id, attempt, worker_id, now_ms, name, kind, key, state, wake_at_ms, parked_run_at_ms, message_seq, payload
insert into cairnq_waits (task_id, name, kind, event_key, state, wake_at_ms, parked_run_at_ms,
                          message_seq, payload, created_at_ms, ended_at_ms)
select :id, :name, :kind, :key, :state, :wake_at_ms, :parked_run_at_ms, :message_seq, :payload,
       :now_ms, case when :state = 'waiting' then null else :now_ms end
where exists (
    select 1 from cairnq_tasks
    where id = :id and status = 'running' and worker_id = :worker_id
      and attempt = :attempt and lease_until_ms > :now_ms
)
on conflict (task_id, name) do update
set state = excluded.state,
    message_seq = excluded.message_seq,
    payload = excluded.payload,
    ended_at_ms = excluded.ended_at_ms
where cairnq_waits.state = 'waiting'
returning state, wake_at_ms, parked_run_at_ms, message_seq, payload;
