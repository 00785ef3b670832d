-- Cheap pre-check: is a due queued task waiting in queues (among names), or has any lease expired?
-- Returns one row (has_work).
-- params: queues, names, now_ms
-- tier: each queue's distinct queued priorities, highest first (a skip scan over the claim
-- index, at most 16 of them); the due rows of each tier are one index seek away, so a deep
-- backlog of delayed rows is never read. Priorities below the 16th are searched as one range.
with recursive
    listed (queue) as (select value from json_each(:queues)),
    tier (queue, priority, depth) as (
        select listed.queue, (
            select max(priority) from cairnq_tasks
            where queue = listed.queue and status = 'queued'
        ), 1
        from listed
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
        where tier.priority is not null
          and (
              exists (
                  select 1
                  from cairnq_tasks
                  where queue = tier.queue
                    and status = 'queued'
                    and priority = tier.priority
                    and run_at_ms <= :now_ms
                    and (:names is null or name in (select value from json_each(:names)))
              )
              or (
                  tier.depth = 16
                  and exists (
                      select 1
                      from cairnq_tasks
                      where queue = tier.queue
                        and status = 'queued'
                        and priority < tier.priority
                        and run_at_ms <= :now_ms
                        and (:names is null or name in (select value from json_each(:names)))
                  )
              )
          )
    )
    or exists (
        select 1
        from cairnq_tasks
        where status = 'running' and lease_until_ms is not null
          and lease_until_ms <= :now_ms
    )
) as has_work;
