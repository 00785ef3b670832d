-- Claims up to limit due queued tasks of one name in one queue, in claim order.
-- Returns the claimed rows (running, owned by worker_id, in no set order), or zero rows when nothing is due.
-- params: queue, name, now_ms, worker_id, lease_ms, limit
update cairnq_tasks
set status = 'running',
    worker_id = :worker_id,
    lease_until_ms = :now_ms + :lease_ms,
    attempt = attempt + 1,
    updated_at_ms = :now_ms
where id in (
    select id
    from cairnq_tasks
    where queue = :queue
      and status = 'queued'
      and name = :name
      and run_at_ms <= :now_ms
    order by priority desc, run_at_ms asc, id asc
    limit :limit
)
returning *;
