-- Forgets the hourly rollups (extension table cairnq_attempt_rollups, x0028) of the hours in [since_ms, until_ms), before they are rolled up again.
-- Returns nothing.
-- params: since_ms, until_ms
delete from cairnq_attempt_rollups
where hour_ms >= :since_ms and hour_ms < :until_ms;
