-- cairnq extension (not part of the reference protocol): a dependency deleted once it
-- succeeded (a purge, retention, a reference SDK's purge) stays counted succeeded for every
-- dependent still parked on it: the trigger of x0013_workflows_forget.sql records the
-- success in cairnq_dependencies_satisfied before the row goes. A settlement that did not
-- decide its dependents (a reference SDK's worker, or a cairnq worker that had not seen a
-- parked task yet) then leaves nothing a purge can undo before the sweep decides them.
drop trigger if exists cairnq_workflows_forget;
create trigger if not exists cairnq_workflows_forget
    after delete on cairnq_tasks
begin
    insert or ignore into cairnq_dependencies_satisfied (task_id, depends_on_id)
    select task_id, depends_on_id from cairnq_dependencies
    where depends_on_id = old.id
      and old.status = 'succeeded'
      and task_id in (select task_id from cairnq_parked);
    delete from cairnq_dependencies_satisfied where task_id = old.id;
    delete from cairnq_dependencies where task_id = old.id;
    delete from cairnq_parked where task_id = old.id;
end;
