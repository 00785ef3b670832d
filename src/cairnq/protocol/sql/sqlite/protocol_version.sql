-- Reads the protocol version recorded in cairnq_meta.
-- Returns (value), or zero rows when the meta row is missing.
-- params: none
select value from cairnq_meta where key = 'protocol_version';
