-- Notes that every hour before until_ms is rolled up (extension table cairnq_attempt_rollup_marks, x0028); the mark never moves back.
-- Returns nothing.
-- params: until_ms
insert into cairnq_attempt_rollup_marks (id, rolled_until_ms)
values (1, :until_ms::bigint)
on conflict (id) do update
set rolled_until_ms = case
    when cairnq_attempt_rollup_marks.rolled_until_ms > excluded.rolled_until_ms
    then cairnq_attempt_rollup_marks.rolled_until_ms
    else excluded.rolled_until_ms
end;
