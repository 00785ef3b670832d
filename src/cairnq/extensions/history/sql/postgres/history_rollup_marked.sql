-- Reads how far the hourly rollups reach (extension table cairnq_attempt_rollup_marks, x0028): every hour before rolled_until_ms is rolled up.
-- Returns one row (rolled_until_ms), or zero rows before the first rollup.
-- params: none
select rolled_until_ms from cairnq_attempt_rollup_marks where id = 1;
