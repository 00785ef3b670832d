-- Cheap pre-check: is a due queued task waiting in queues (among names), or has any lease expired?
-- Returns one row (has_work).
-- params: queues, names, now_ms
-- tier: each queue's distinct queued priorities, highest first (a skip scan over the claim
-- index, at most 16 of them); the due rows of each tier are one index seek away, so a deep
-- backlog of delayed rows is never read. Priorities below the 16th are searched as one range.
with recursive tier (queue, priority, depth) as (
    select listed.queue, (
        select max(priority) from cairnq_tasks
        where queue = listed.queue and status = 'queued'
    ), 1
    from unnest(:queues::text[]) as listed (queue)
    union all
    select tier.queue, (
        select max(priority) from cairnq_tasks
        where queue = tier.queue and status = 'queued' and priority < tier.priority
    ), tier.depth + 1
    from tier
    where tier.priority is not null and tier.depth < 16
)
select (
    exists (
        select 1
        from tier
        cross join lateral (
            -- due rows of one priority tier: an index seek on (queue, status, priority, run_at_ms)
            select 1
            from cairnq_tasks
            where queue = tier.queue
              and status = 'queued'
              and priority = tier.priority
              and run_at_ms <= clock.now_ms
              and (:names::text[] is null or name = any(:names::text[]))
            order by run_at_ms asc
            limit 1
        ) as due
    )
    or exists (
        select 1
        from tier
        cross join lateral (
            -- past the last tier walked: the lower priorities, in claim order
            select 1
            from cairnq_tasks
            where queue = tier.queue
              and status = 'queued'
              and priority < tier.priority
              and run_at_ms <= clock.now_ms
              and (:names::text[] is null or name = any(:names::text[]))
            order by priority desc, run_at_ms asc, id asc
            limit 1
        ) as lower_due
        where tier.depth = 16
    )
    or exists (
        select 1
        from cairnq_tasks
        where status = 'running' and lease_until_ms is not null
          and lease_until_ms <= clock.now_ms
    )
) as has_work
from (select coalesce(:now_ms::bigint, floor(extract(epoch from clock_timestamp()) * 1000)::bigint) as now_ms offset 0) as clock;
