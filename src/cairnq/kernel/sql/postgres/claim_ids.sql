-- Claims the listed tasks that are still queued (a limited claim chose them, under their row locks).
-- Returns the claimed rows (running, owned by worker_id, in no set order), each with lease_token, its new token in cairnq_leases.
-- params: ids, now_ms, worker_id, lease_ms
with clock as materialized (
    select coalesce(:now_ms::bigint, floor(extract(epoch from clock_timestamp()) * 1000)::bigint) as now_ms
),
claimed as (
    update cairnq_tasks
    set status = 'running',
        worker_id = :worker_id::text,
        lease_until_ms = (select now_ms from clock) + :lease_ms::bigint,
        attempt = attempt + 1,
        updated_at_ms = (select now_ms from clock)
    where id = any(:ids::text[])
      and status = 'queued'
    returning *
),
tokens as (
    insert into cairnq_leases (task_id, token)
    select id, 1 from claimed
    on conflict (task_id) do update set token = cairnq_leases.token + 1
    returning task_id, token
)
select claimed.*, tokens.token as lease_token
from claimed
join tokens on tokens.task_id = claimed.id;
