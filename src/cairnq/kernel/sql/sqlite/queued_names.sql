-- Each distinct (queue, name) among queued tasks, due or not, by index seeks (one per queue on the claim index, one per queued name of a queue on the claim name index), never a scan.
-- Returns (queue, name) rows ordered by queue, then name.
-- params: none
with recursive
queues (queue) as (
    select (select queue from cairnq_tasks order by queue limit 1)
    union all
    select (select t.queue from cairnq_tasks as t where t.queue > queues.queue order by t.queue limit 1)
    from queues
    where queues.queue is not null
),
pairs (queue, name) as (
    select queues.queue,
        (select t.name from cairnq_tasks as t
         where t.queue = queues.queue and t.status = 'queued'
         order by t.name limit 1)
    from queues
    where queues.queue is not null
    union all
    select pairs.queue,
        (select t.name from cairnq_tasks as t
         where t.queue = pairs.queue and t.status = 'queued' and t.name > pairs.name
         order by t.name limit 1)
    from pairs
    where pairs.name is not null
)
select queue, name from pairs where name is not null order by queue, name;
