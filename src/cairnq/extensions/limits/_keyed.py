"""The keyed claim: a limited claim in one or two statements, for the common shape.

When one concurrency limit keyed by a JSON path (or by nothing) governs every task a
draw can take, from one queue, and no other limit governs any of them, a page of
the claim is one statement that counts the running tasks per key, reads the page
leaving out full keys and admits in claim order while each key has room. The
running tasks are those the limit governs, each counted under the key its own JSON
gives (as ``limits_running_by_path`` counts them), so nothing is recorded at claim:
a task counts while it runs, whoever claimed it.

- PostgreSQL (``limits_claim_keyed``) also claims the admitted tasks in that
  statement. The limit's row lock is taken by the statement before it
  (``limits_lock``, sent with it), so the page's snapshot sees every claim
  committed before it.
- SQLite (``limits_admit_keyed``), without data-modifying CTEs, chooses the tasks;
  ``claim_ids`` claims them, in the claim's write transaction (which SQLite runs
  one at a time).

When the running tasks the limit governs and the whole claim fit within the amount,
no key can fill and the pages would admit the first due tasks in claim order:
``limits_claim_fitting`` claims those in a lighter statement, each with its key, and
claims nothing otherwise. A claim tries it first while the limit's last claim fit
(every page says whether it did), so a limit that binds costs no extra statement.

Any other shape goes through the general claim (``_claim.ClaimGate.claim``).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Literal

from ... import kernel
from ...protocol.steps import NOW, Call, Op, Row
from ._model import Limit
from ._ops import database_now

Flavour = Literal["claim", "admit"]

# How each dialect runs a keyed page.
FLAVOURS: dict[str, Flavour] = {"postgres": "claim", "sqlite": "admit"}

# The page figures the statements add to every row they return.
_FIGURES = frozenset(
    {
        "page_rows",
        "page_full_keys",
        "page_fits",
        "page_now_ms",
        "page_priority",
        "page_run_at_ms",
        "page_id",
        "limit_key",
    }
)


def keyed_limit(
    active: Sequence[Limit], queues: Sequence[str], names: Sequence[str] | None
) -> Limit | None:
    """The one limit a keyed claim can enforce for this draw, else ``None``.

    It must be the only limit in force for the draw, a concurrency limit keyed by a
    path (or without a key), and govern every task the draw can take, from one queue
    (so the claim index serves the page in order).
    """
    if len(active) != 1:
        return None
    limit = active[0]
    if limit.kind != "concurrency" or limit.function_key or len(queues) != 1:
        return None
    return limit if limit.governs_every_task_of(queues, names) else None


class KeyedPage:
    """What one page of a keyed claim saw: its size, whether keys were full, whether the
    claim fit within the amount whatever the keys, its end."""

    __slots__ = ("cursor", "fits", "full_keys", "rows")

    def __init__(self, figures: Row) -> None:
        self.rows = int(figures["page_rows"])
        self.full_keys = int(figures["page_full_keys"] or 0)
        self.fits = bool(figures["page_fits"])
        self.cursor = (figures["page_priority"], figures["page_run_at_ms"], figures["page_id"])


def keyed_page(
    flavour: Flavour,
    limit: Limit,
    queues: Sequence[str],
    names: Sequence[str] | None,
    want: int,
    page: int,
    worker_id: str,
    lease_ms: int,
    now_ms: int | None,
    cursor: tuple[Any, Any, Any],
) -> Op[tuple[list[tuple[Row, str | None]], KeyedPage, int | None]]:
    """Claim one page's admitted tasks: each claimed row with the key it counts under
    (``None``: the statement could not compute it, so it counts against nothing), what
    the page saw, and the now it claimed at (to pass to the next page)."""
    params = {
        **_draw(limit, queues, names, want),
        "after_priority": cursor[0],
        "after_run_at_ms": cursor[1],
        "after_id": cursor[2],
        "page": page,
    }
    if flavour == "claim":
        result = yield Call(
            "limits_claim_keyed",
            {
                **params,
                "now_ms": NOW if now_ms is None else now_ms,
                "worker_id": kernel.claimant(worker_id, False),
                "lease_ms": lease_ms,
            },
        )
        claimed: list[tuple[Row, str | None]] = [
            (_without_figures(row), row["limit_key"]) for row in result if row["id"] is not None
        ]
        return claimed, KeyedPage(result[0]), int(result[0]["page_now_ms"])
    if now_ms is None:
        now_ms = yield from database_now()
    result = yield Call("limits_admit_keyed", {**params, "now_ms": now_ms})
    seen = KeyedPage(result[0])
    keys = {row["id"]: _text(row["limit_key"]) for row in result if row["id"] is not None}
    if not keys:
        return [], seen, now_ms
    rows = yield from kernel.claim_ids(list(keys), now_ms, worker_id, lease_ms)
    return [(row, keys[row["id"]]) for row in rows], seen, now_ms


def keyed_fitting(
    limit: Limit,
    queues: Sequence[str],
    names: Sequence[str] | None,
    want: int,
    worker_id: str,
    lease_ms: int,
    *,
    apart: bool = False,
) -> Op[list[tuple[Row, str | None]]]:
    """Claim the first ``want`` due tasks in claim order, each with the key it counts
    under (``None``: none the statement could compute), when the claim fits within
    ``limit`` whatever the keys; nothing when it does not fit or nothing is due
    (``keyed_page`` then decides). ``apart``: the statement and the lock sent just
    before it may commit by themselves (``Call.apart``)."""
    rows = yield Call(
        "limits_claim_fitting",
        {
            **_draw(limit, queues, names, want),
            "now_ms": NOW,
            "worker_id": kernel.claimant(worker_id, False),
            "lease_ms": lease_ms,
        },
        apart=apart,
    )
    return [(_without_figures(row), _text(row["limit_key"])) for row in rows]


def _draw(
    limit: Limit, queues: Sequence[str], names: Sequence[str] | None, want: int
) -> dict[str, Any]:
    """The parameters every keyed statement takes: the limit, its scope and key, the
    draw's queue and names, and how many tasks it wants."""
    return {
        "limit_name": limit.id,
        "scope_name": limit.target if limit.scope == "name" else None,
        "queue": queues[0],
        "names": None if names is None else list(names),
        "key_root": limit.key_root,
        "key_path": limit.json_path,
        "want": want,
    }


def _without_figures(row: Row) -> dict[str, Any]:
    """A claimed row as the task's columns alone (the page's figures taken out)."""
    task = dict(row)
    for name in _FIGURES:
        task.pop(name, None)
    return task


def _text(key: bytes | str | None) -> str | None:
    """A key a statement returned: SQLite's as bytes, ``None`` for bytes that are not
    UTF-8 (text another writer left invalid: the caller refuses the task); PostgreSQL's
    as text."""
    if key is None or isinstance(key, str):
        return key
    try:
        return bytes(key).decode("utf-8")
    except UnicodeDecodeError:
        return None
