-- Headroom of a queue: max_depth minus its queued rows (delayed included), counting at most max_depth of them.
-- Returns one row (headroom, from 0 to max_depth).
-- params: queue, max_depth
select greatest(0, :max_depth::bigint - (
    select count(*)
    from (
        select 1
        from cairnq_tasks
        where queue = :queue::text and status = 'queued'
        limit :max_depth::bigint
    ) as queued
)) as headroom;
