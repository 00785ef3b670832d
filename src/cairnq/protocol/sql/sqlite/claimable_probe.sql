-- Cheap pre-check: is a due queued task waiting in queues (among names), or has any lease expired?
-- Returns one row (has_work).
-- params: queues, names, now_ms
select (
    exists (
        select 1
        from cairnq_tasks
        where queue in (select value from json_each(:queues))
          and status = 'queued'
          and (:names is null or name in (select value from json_each(:names)))
          and run_at_ms <= :now_ms
    )
    or exists (
        select 1
        from cairnq_tasks
        where status = 'running' and lease_until_ms is not null
          and lease_until_ms <= :now_ms
    )
) as has_work;
