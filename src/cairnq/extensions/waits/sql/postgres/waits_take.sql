-- The oldest unexpired event a wait of task id on key may take: one not taken yet, or a fanout one this task's waits never received; addressed to the key, or to the key and this task.
-- Returns one row (seq, payload, fanout), or zero rows when none is kept.
-- params: key, id, now_ms
select m.seq, m.payload, m.fanout
from cairnq_waits_mailbox as m
where m.event_key = :key::text and m.expires_at_ms > :now_ms::bigint
  and (m.task_id is null or m.task_id = :id::text)
  and ((not m.fanout and m.taken_by is null)
       or (m.fanout and not exists (
           select 1 from cairnq_waits as w where w.task_id = :id::text and w.message_seq = m.seq)))
order by m.seq
limit 1;
