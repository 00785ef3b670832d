-- Serializes the submits of one throttle key: the BEGIN IMMEDIATE around it already does, so this is a no-op.
-- Returns one row, which callers ignore.
-- params: key
select :key as key;
