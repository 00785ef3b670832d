"""Claiming: the probe, the recovery of expired leases, and the claim transaction
with its draws (a ``DrawClaimer`` claims the draws it governs).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ..models import holder, new_nonce
from ..protocol.steps import NOW, Call, Op, Pipelined, Row, SingleStatement, together
from ._shared import Draw as Draw
from ._shared import _emit_for, _named
from .points import NO_POINTS, BeforeRecover, DrawClaimer, Points, Recovered

LEASE_EXPIRED_ERROR = (
    '{"type":"LeaseExpired","code":"lease_expired",'
    '"message":"task lease expired and max attempts reached","retryable":false,"details":{}}'
)


def probe(queues: Sequence[str], names: Sequence[str] | None) -> Op[bool]:
    """Whether a claim transaction would find work (due tasks, or an expired lease)."""
    rows = yield Call(
        "claimable_probe",
        {"queues": list(queues), "names": None if names is None else list(names), "now_ms": NOW},
    )
    return bool(rows and rows[0]["has_work"])


def recover(limit: int, *, points: Points = NO_POINTS) -> Op[list[Row]]:
    """Move up to ``limit`` expired leases out of ``running`` (any queue, any name).

    The attempt hooks of ``points`` in use run in the same transaction (each after
    its ``BeforeRecover``, which runs before the recovery); without any the
    recovery is one statement.
    """
    hooks = points.recovering()
    if not hooks:
        return SingleStatement(_named(_recover(limit), "recover"))
    return _named(_recover_hooked(limit, hooks), "recover")


def _recover(limit: int) -> Op[list[Row]]:
    rows = yield Call(
        "recover_leases",
        {"now_ms": NOW, "lease_expired_error": LEASE_EXPIRED_ERROR, "limit": limit},
    )
    yield from _emit_for(rows)
    return list(rows)


def _recover_hooked(limit: int, hooks: Sequence[tuple[Any, BeforeRecover | None]]) -> Op[list[Row]]:
    before: list[object] = []
    for _, first in hooks:
        before.append(None if first is None else (yield from first(limit)))
    rows = yield from _recover(limit)
    for (hook, _), seen in zip(hooks, before, strict=True):
        yield from hook((), Recovered(seen, rows))
    return rows


def claim(
    queues: Sequence[str],
    worker_id: str,
    lease_ms: int,
    draws: Sequence[Draw],
    recover_limit: int,
    recovered: list[Row] | None = None,
    *,
    points: Points = NO_POINTS,
    alone: bool = False,
    bare: bool = False,
) -> Op[list[Row]]:
    """Recover expired leases, then claim each draw, all in one transaction (a lone
    draw's claimer may commit its first statements apart: ``Call.apart``).

    Returns the claimed rows, undecoded (a row whose JSON cannot be read is the
    worker's to fail, not a reason to abort the whole claim), in claim order.
    ``recovered``, when given, receives the rows the recovery moved out of
    ``running``, from the attempt that committed (a retried transaction starts it over).
    The draw claimers of ``points`` in use claim the draws they govern (the first
    that governs a draw claims it); every other draw is claimed as without them.
    The recovery runs ``points``' attempt hooks as ``recover`` does.
    A ``recover_limit`` of 0 leaves expired leases to another claim or the recoverer.
    ``alone``: the backend runs a lone claim statement autocommitted; a claim that is
    one statement (no recovery, no claimer in use, one draw) is then marked so.
    Each claim statement writes ``worker_id`` with a nonce fresh for it (the fence of
    every owned write); ``bare``: the id alone, as the reference's store claims write it.
    """
    claimers = points.claimers()
    live = [d for d in draws if d.limit > 0 and (d.names is None or d.names)]
    op = _named(
        _claim(queues, worker_id, lease_ms, live, recover_limit, recovered, points, claimers, bare),
        "claim",
    )
    if alone and recover_limit <= 0 and not claimers and len(live) == 1:
        return SingleStatement(op)
    if claimers:
        # A draw claimer may send steps whose rows it does not read (a lock) ahead of
        # the statement that follows them.
        return Pipelined(op)
    return op


def _claim(
    queues: Sequence[str],
    worker_id: str,
    lease_ms: int,
    draws: Sequence[Draw],
    recover_limit: int,
    recovered: list[Row] | None,
    points: Points,
    claimers: Sequence[DrawClaimer],
    bare: bool,
) -> Op[list[Row]]:
    if recover_limit > 0:
        rows = yield from recover(recover_limit, points=points)
        if recovered is not None:
            recovered[:] = rows
    claimed: list[Row] = []
    for n, draw in enumerate(draws, 1):
        for claimer in claimers:
            governing = claimer.governing(queues, draw.names)
            if governing:
                drawn = claimer.claim(
                    queues, draw.names, draw.limit, worker_id, lease_ms, governing
                )
                # A draw's claim may commit apart (``Call.apart``) only when no step follows
                # it whose failure would leave its tasks claimed for nobody.
                rows = yield from (drawn if n == len(draws) else together(drawn))
                break
        else:
            rows = yield from claim_draw(
                queues, draw.names, draw.limit, worker_id, lease_ms, bare=bare
            )
        claimed.extend(rows)
    return claimed


def claim_draw(
    queues: Sequence[str],
    names: Sequence[str] | None,
    limit: int,
    worker_id: str,
    lease_ms: int,
    *,
    bare: bool = False,
) -> Op[list[Row]]:
    """Claim up to ``limit`` due tasks of ``names`` in ``queues``: one statement, writing
    ``worker_id`` with a fresh nonce (``bare``: the id alone, as the reference's store
    claims); the claimed rows in claim order."""
    statement, params = _claim_variant(queues, names)
    params.update(
        {
            "now_ms": NOW,
            "worker_id": claimant(worker_id, bare),
            "lease_ms": lease_ms,
            "limit": limit,
        }
    )
    rows = yield Call(statement, params)
    return sorted(rows, key=lambda r: (-r["priority"], r["run_at_ms"], r["id"]))


def claim_ids(
    ids: Sequence[str], now_ms: int, worker_id: str, lease_ms: int, *, bare: bool = False
) -> Op[list[Row]]:
    """Claim the tasks ``ids`` that are still queued and due at ``now_ms`` for
    ``worker_id`` (with a fresh nonce, unless ``bare``), as a step of a claim
    transaction (a draw claimer's, which chose them); the claimed rows."""
    rows = yield Call(
        "claim_ids",
        {
            "ids": list(ids),
            "now_ms": now_ms,
            "worker_id": claimant(worker_id, bare),
            "lease_ms": lease_ms,
        },
    )
    return list(rows)


def claimant(worker_id: str, bare: bool) -> str:
    """The ``worker_id`` column value a claim statement writes: the worker id and a nonce
    fresh for this statement, so no two claims of a task write the same value."""
    return holder(worker_id, None if bare else new_nonce())


def _claim_variant(
    queues: Sequence[str], names: Sequence[str] | None
) -> tuple[str, dict[str, Any]]:
    """The claim statement whose equality predicates let the index serve this draw in order."""
    one_queue = len(queues) == 1
    if names is not None and len(names) == 1:
        if one_queue:
            return "claim_one_queue_one_name", {"queue": queues[0], "name": names[0]}
        return "claim_one_name", {"queues": list(queues), "name": names[0]}
    listed = None if names is None else list(names)
    if one_queue:
        return "claim_one_queue", {"queue": queues[0], "names": listed}
    return "claim", {"queues": list(queues), "names": listed}


def expired_leases_exist() -> Op[bool]:
    """Whether some running task's lease has expired (a read; any queue, any name)."""
    rows = yield Call("expired_lease_probe", {"now_ms": NOW})
    return bool(rows and rows[0]["has_expired"])
