-- Reads whether a submit marked the task policies in use (cairnq_policies_use, x0020), with this statement's clock.
-- Returns its row (since_ms, now_ms), or none.
-- params: now_ms
select since_ms, :now_ms as now_ms from cairnq_policies_use where name = 'policies';
