-- Reads the clock the other statements use, so one read can pass a single now to several.
-- Returns one row (now_ms).
-- params: now_ms
select coalesce(:now_ms::bigint, floor(extract(epoch from clock_timestamp()) * 1000)::bigint) as now_ms;
