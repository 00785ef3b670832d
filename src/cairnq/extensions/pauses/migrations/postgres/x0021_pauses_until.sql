-- cairnq extension (not part of the reference protocol): timed pauses.
-- cairnq_pause_ends holds when a pause of cairnq_pauses (x0007) ends by itself; a
-- pause without a row here lasts until it is resumed. Once resume_at_ms has passed,
-- cairnq's reads leave the pause out, and the next pause or resume deletes it. A
-- row goes with its pause (the foreign key below).
-- Reference SDKs ignore both tables: a pause does not exist for their workers.
create table if not exists cairnq_pause_ends (
    scope text not null,
    target text not null,
    resume_at_ms bigint not null,
    primary key (scope, target),
    foreign key (scope, target) references cairnq_pauses (scope, target) on delete cascade
);
