-- Forgets the recorded keys of the listed counts whose task is no longer running (a reference SDK worker settled or recovered it, a gather parked it, it was purged); rows is a JSON array of [limit_name, key_value], locked by limits_counts_lock earlier in the transaction, so no claim is taking these keys. A key a settlement is forgetting now is skipped (its release takes it from the count). limits_counts_fix then sets the counts from the keys left.
-- Returns (limit_name, key_value) for each key forgotten.
-- params: rows
with stale as (
    select k.task_id, k.limit_name
    from cairnq_limit_keys k
    join jsonb_array_elements(:rows::jsonb) as r
        on k.limit_name = r ->> 0 and k.key_value = r ->> 1
    left join cairnq_tasks t on t.id = k.task_id
    where t.status is distinct from 'running'
    for update of k skip locked
)
delete from cairnq_limit_keys k
using stale s
where k.task_id = s.task_id and k.limit_name = s.limit_name
returning k.limit_name, k.key_value;
