-- Stores the fair share of queue (key_root, key_path: the JSON path into payload or metadata; weights: a JSON object of key to weight), replacing the queue's share.
-- Returns nothing.
-- params: queue, key_root, key_path, weights, now_ms
insert into cairnq_fair_shares (queue, key_root, key_path, weights, updated_at_ms)
values (
    :queue::text, :key_root::text, :key_path::text, :weights::jsonb,
    coalesce(:now_ms::bigint, floor(extract(epoch from clock_timestamp()) * 1000)::bigint)
)
on conflict (queue) do update set
    key_root = excluded.key_root, key_path = excluded.key_path, weights = excluded.weights,
    updated_at_ms = excluded.updated_at_ms;
