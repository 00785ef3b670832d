-- Counts tasks finished since since_ms per queue, terminal status and bucket (bucket_ms wide, from since_ms).
-- Returns (queue, status, bucket, count) rows; buckets with nothing finished are absent.
-- params: since_ms, bucket_ms
select queue, status, (completed_at_ms - :since_ms) / :bucket_ms as bucket, count(*) as count
from cairnq_tasks
where completed_at_ms >= :since_ms
  and status in ('succeeded', 'failed', 'canceled')
group by queue, status, bucket
order by queue, status, bucket;
