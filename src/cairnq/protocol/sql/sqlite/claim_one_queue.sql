-- Claims up to limit due queued tasks of one queue (and names, unless null), in claim order.
-- Returns the claimed rows (running, owned by worker_id, in no set order), or zero rows when nothing is due.
-- params: queue, names, now_ms, worker_id, lease_ms, limit
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
      and (:names is null or name in (select value from json_each(:names)))
      and run_at_ms <= :now_ms
    order by priority desc, run_at_ms asc, id asc
    limit :limit
)
returning *;
