-- Headroom of a queue: max_depth minus its queued rows (delayed included), counting at most max_depth of them.
-- Returns one row (headroom, from 0 to max_depth).
-- params: queue, max_depth
select max(0, :max_depth - (
    select count(*)
    from (
        select 1
        from cairnq_tasks
        where queue = :queue and status = 'queued'
        limit :max_depth
    )
)) as headroom;
