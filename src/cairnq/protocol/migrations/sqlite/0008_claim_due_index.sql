-- Rebuilds both claim indexes in claim order (priority desc, run_at_ms, id) so a
-- single-queue draw reads due rows first and needs no sort.
drop index if exists cairnq_tasks_claim_idx;
create index if not exists cairnq_tasks_claim_idx
    on cairnq_tasks (queue, status, priority desc, run_at_ms, id);

drop index if exists cairnq_tasks_claim_name_idx;
create index if not exists cairnq_tasks_claim_name_idx
    on cairnq_tasks (queue, status, name, priority desc, run_at_ms, id);

update cairnq_meta set value = '8' where key = 'schema_version';
