-- Reads the clock the other statements use, so one read can pass a single now to several.
-- Returns one row (now_ms).
-- params: now_ms
select :now_ms as now_ms;
