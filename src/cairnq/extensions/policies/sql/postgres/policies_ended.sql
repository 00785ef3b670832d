-- Records why a policy ended a task (cairnq_policies_tasks, x0020): reason ('expired').
-- Returns nothing.
-- params: id, reason
update cairnq_policies_tasks set reason = :reason::text where task_id = :id::text;
