-- Serializes submits of these keys until commit: BEGIN IMMEDIATE already does on SQLite; keys is a JSON array of strings.
-- Returns one row.
-- params: keys
select json_array_length(:keys) as locked;
