-- Every fair share (extension table cairnq_fair_shares, x0022), by queue.
-- Returns one row per shared queue (queue, key_root, key_path, weights as JSON text, updated_at_ms).
-- params: none
select queue, key_root, key_path, weights, updated_at_ms
from cairnq_fair_shares
order by queue;
