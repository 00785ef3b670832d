"""Operations on limits (extension tables ``cairnq_limits``, ``cairnq_limit_keys``,
``cairnq_rate_buckets``): store, list and remove limits, and read their use.

The limited claim, which reads and writes the same tables inside a worker's claim
transaction, is ``_claim``.
"""

from __future__ import annotations

from collections.abc import Sequence

from ... import kernel
from ..._checks import check_text
from ...errors import InvalidArgument, SchemaIncomplete
from ...protocol.steps import NOW, Call, Op
from ._model import Limit, LimitUsage

LIMITS_MIGRATION = "x0006_limits.sql"
WAITING_CAP = 10_000
SOURCES = ("worker", "operator")


def limits_ready() -> Op[bool]:
    """Whether the database has the limits tables (migration ``x0006_limits.sql``)."""
    applied = yield from kernel.applied_migrations()
    return LIMITS_MIGRATION in applied


def _require() -> Op[None]:
    ready = yield from limits_ready()
    if not ready:
        raise SchemaIncomplete(
            f"this database lacks cairnq's limits (migration {LIMITS_MIGRATION}); "
            "run `cairnq migrate` to add them",
            missing=(LIMITS_MIGRATION,),
        )


def database_now() -> Op[int]:
    """The database clock's now, in epoch ms."""
    rows = yield Call("clock_now", {"now_ms": NOW})
    return int(rows[0]["now_ms"])


# --- definitions -----------------------------------------------------------------------


def put(limit: Limit, *, source: str) -> Op[Limit]:
    """Store ``limit`` (replacing one of the same id); returns it as stored.

    A rate limit whose numbers change starts its buckets full again.

    Raises:
        InvalidArgument: ``limit`` is not a ``Limit`` or ``source`` is unknown.
        SchemaIncomplete: the database lacks the limits tables.
    """
    if not isinstance(limit, Limit):
        raise InvalidArgument(f"expected a Limit, not {type(limit).__name__}")
    if source not in SOURCES:
        raise InvalidArgument(f"source must be one of {', '.join(SOURCES)}; got {source!r}")
    return _put(limit, source)


def _put(limit: Limit, source: str) -> Op[Limit]:
    yield from _require()
    before = yield Call("limits_lock", {"names": [limit.id]})
    rows = yield Call(
        "limits_put",
        {
            "name": limit.id,
            "scope": limit.scope,
            "target": limit.target,
            "key_path": limit.key,
            "kind": limit.kind,
            "amount": limit.amount,
            "period_ms": limit.period_ms,
            "burst": limit.burst,
            "source": source,
            "now_ms": NOW,
        },
    )
    stored = limit.with_amounts(rows[0])
    if before and Limit.from_row(before[0]).with_amounts(rows[0]) != Limit.from_row(before[0]):
        yield Call("limits_buckets_delete", {"name": limit.id})
    return stored


def list_all() -> Op[list[Limit]]:
    """Every stored limit, by id."""
    yield from _require()
    return (yield from list_with_tables())


def list_with_tables() -> Op[list[Limit]]:
    """``list_all`` on a database known to have the limits tables (no ledger read)."""
    rows = yield Call("limits_list", {})
    return [Limit.from_row(r) for r in rows]


def remove(limit_id: str) -> Op[bool]:
    """Delete a limit with its recorded keys and buckets; ``False`` when none had the id."""
    checked = check_text(limit_id, "limit id") or ""
    return _remove(checked)


def _remove(limit_id: str) -> Op[bool]:
    yield from _require()
    rows = yield Call("limits_delete", {"name": limit_id})
    yield Call("limits_keys_delete", {"name": limit_id})
    yield Call("limits_buckets_delete", {"name": limit_id})
    return bool(rows)


def running_counts(limits: Sequence[Limit]) -> Op[dict[tuple[str, str], int]]:
    """Running tasks per (limit id, key) of the concurrency limits among ``limits``.

    A limit keyed by a path, or by nothing, counts the running tasks it governs, each
    under the key its own JSON gives, whoever claimed it (``limits_running_by_path``;
    nothing is recorded for them). A limit keyed by a function, whose keys only a
    worker can compute, counts the keys recorded when its tasks were claimed
    (``limits_running``).
    """
    counts: dict[tuple[str, str], int] = {}
    concurrency = [limit for limit in limits if limit.kind == "concurrency"]
    recorded = [limit.id for limit in concurrency if limit.function_key]
    if recorded:
        for row in (yield Call("limits_running", {"names": recorded})):
            counts[(row["limit_name"], row["key_value"])] = int(row["running"])
    for limit in concurrency:
        if limit.function_key:
            continue
        params = {
            "scope": limit.scope,
            "target": limit.target,
            "key_root": limit.key_root,
            "key_path": limit.json_path,
        }
        for row in (yield Call("limits_running_by_path", params)):
            counts[(limit.id, row["key_value"])] = int(row["running"])
    return counts


def usage() -> Op[list[LimitUsage]]:
    """Every limit's running tasks per key, waiting tasks and rate tokens, now."""
    yield from _require()
    rows = yield Call("limits_list", {})
    limits = [Limit.from_row(r) for r in rows]
    if not limits:
        return []
    now = yield from database_now()
    names = [limit.id for limit in limits]
    running: dict[str, dict[str, int]] = {}
    for (limit_id, key), count in (yield from running_counts(limits)).items():
        running.setdefault(limit_id, {})[key] = count
    tokens: dict[str, dict[str, float]] = {}
    by_id = {limit.id: limit for limit in limits}
    for row in (yield Call("limits_buckets", {"names": names})):
        limit = by_id[row["limit_name"]]
        if limit.kind == "rate":
            level = limit.refill(float(row["tokens"]), now - int(row["refreshed_at_ms"]))
            tokens.setdefault(limit.id, {})[row["key_value"]] = level
    out = []
    for limit in limits:
        waiting = yield Call(
            "limits_waiting",
            {
                "queue": limit.target if limit.scope == "queue" else None,
                "name": limit.target if limit.scope == "name" else None,
                "now_ms": now,
                "cap": WAITING_CAP,
            },
        )
        out.append(
            LimitUsage(
                limit=limit,
                running=running.get(limit.id, {}) if limit.kind == "concurrency" else {},
                waiting=int(waiting[0]["waiting"]),
                tokens=tokens.get(limit.id, {}),
            )
        )
    return out


def usage_if_ready() -> Op[list[LimitUsage] | None]:
    """``usage()``, or ``None`` when the database lacks the limits tables.

    For views (``cairnq top``) that show limits when there are any and have
    nothing to show, not an error, on a database without them.
    """
    ready = yield from limits_ready()
    if not ready:
        return None
    return (yield from usage())
