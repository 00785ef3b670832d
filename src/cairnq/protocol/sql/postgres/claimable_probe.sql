-- Cheap pre-check: is a due queued task waiting in queues (among names), or has any lease expired?
-- Returns one row (has_work).
-- params: queues, names, now_ms
select (
    exists (
        select 1
        from unnest(:queues::text[]) as listed (queue)
        cross join lateral (
            -- one draw per queue in claim-index order: an index scan even when the queue is deep in backoff
            select 1
            from cairnq_tasks
            where queue = listed.queue
              and status = 'queued'
              and (:names::text[] is null or name = any(:names::text[]))
              and run_at_ms <= clock.now_ms
            order by priority desc, run_at_ms asc, id asc
            limit 1
        ) as due
    )
    or exists (
        select 1
        from cairnq_tasks
        where status = 'running' and lease_until_ms is not null
          and lease_until_ms <= clock.now_ms
    )
) as has_work
from (select coalesce(:now_ms::bigint, floor(extract(epoch from clock_timestamp()) * 1000)::bigint) as now_ms offset 0) as clock;
