-- cairnq extension (not part of the reference protocol): concurrency and rate limits that
-- every cairnq worker on the database enforces when it claims. cairnq_limits holds each
-- limit (declared by a worker or set by an operator); cairnq_limit_keys records, for every
-- task a limited claim took, the partition key it counts against (a row of a task no longer
-- running counts for nothing and is pruned); cairnq_rate_buckets holds each rate limit's
-- token bucket per key. A limit's row is locked by every claim it governs, so claims under
-- one limit run one at a time and the counts they read are exact.
-- Reference SDKs ignore all three tables; their workers claim limited tasks freely.
create table if not exists cairnq_limits (
    name text primary key,
    scope text not null check (scope in ('queue', 'name')),
    target text not null,
    key_path text,
    kind text not null check (kind in ('concurrency', 'rate')),
    amount integer not null check (amount >= 1),
    period_ms integer,
    burst integer,
    source text not null,
    updated_at_ms integer not null
);
create table if not exists cairnq_limit_keys (
    task_id text not null references cairnq_tasks (id) on delete cascade,
    limit_name text not null,
    key_value text not null,
    primary key (task_id, limit_name)
);
create index if not exists cairnq_limit_keys_limit_idx on cairnq_limit_keys (limit_name, key_value);
create table if not exists cairnq_rate_buckets (
    limit_name text not null,
    key_value text not null,
    tokens real not null,
    refreshed_at_ms integer not null,
    primary key (limit_name, key_value)
);
