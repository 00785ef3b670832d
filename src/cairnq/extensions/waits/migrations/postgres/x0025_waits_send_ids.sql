-- cairnq extension (not part of the reference protocol): idempotent sends
-- (cq.events.send(..., id=...)).
-- cairnq_waits_sends: one row per send given an id, with what it did (the event's seq,
-- the tasks it woke as a JSON array, whether the event was kept), so that a second send
-- with the id writes nothing and returns the first's result; address is the send's task
-- id and fan-out as a JSON array, so an id reused for another send is refused. Each row is kept until its
-- expires_at_ms (the event's retention, and at least a day), swept by the sends.
create table if not exists cairnq_waits_sends (
    send_id text primary key,
    event_key text not null,
    address text not null,
    seq bigint not null,
    delivered_to text not null,
    kept boolean not null,
    sent_at_ms bigint not null,
    expires_at_ms bigint not null
);
create index if not exists cairnq_waits_sends_expiry on cairnq_waits_sends (expires_at_ms);
