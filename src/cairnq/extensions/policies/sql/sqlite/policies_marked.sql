-- Reads whether a submit marked the task policies in use (cairnq_policies_use, x0017).
-- Returns its row (since_ms), or none.
-- params: (none)
select since_ms from cairnq_policies_use where name = 'policies';
