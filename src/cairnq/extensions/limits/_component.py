"""The worker's limits: those it declares, stored at start, and those the database holds.

The book reloads the stored limits once a second, so a limit an operator
sets, changes or removes applies to this worker within about a second (a claim
reads the numbers under the limit's lock, so changed numbers apply at once). A
function key is computed only by a worker that declares the limit; elsewhere the
tasks it governs are left for the workers that can.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence

from ...backends import Backend
from ...errors import InvalidArgument
from ...kernel.periodic import ErrorHook, PeriodicJob
from ...protocol.steps import Op, Row
from . import _ops as _limits
from ._claim import ClaimGate
from ._fair import FairClaimer, FairShare, fair_ready, list_shares, put_share
from ._keyed import FLAVOURS
from ._model import Limit

log = logging.getLogger("cairnq.worker")

REFRESH_S = 1.0


def check_declared(limits: Sequence[Limit] | None) -> list[Limit]:
    """The limits a worker declares: ``Limit`` values with distinct ids.

    Raises:
        InvalidArgument: something else was given, or two limits share an id.
    """
    if limits is None:
        return []
    if isinstance(limits, Limit):
        raise InvalidArgument("limits must be a list of Limit values, not a single Limit")
    out: list[Limit] = []
    seen: set[str] = set()
    for limit in limits:
        if not isinstance(limit, Limit):
            raise InvalidArgument(
                f"limits entries must be Limit values, not {type(limit).__name__}"
            )
        if limit.id in seen:
            raise InvalidArgument(f"two limits have the id {limit.id!r}; give one an id=")
        seen.add(limit.id)
        out.append(limit)
    return out


class LimitBook:
    """Declared and stored limits, and the gate claims go through (``None``: no limits).

    The book is the limits' draw claimer (``kernel.points.DrawClaimer``), in use while
    a limit is in force (``in_use``); ``job`` reloads the stored limits once a second.
    """

    def __init__(
        self,
        backend: Backend,
        declared: Sequence[Limit],
        worker_id: str,
        *,
        report: ErrorHook,
        fair: Sequence[FairShare] = (),
    ) -> None:
        self.backend = backend
        self.declared = {limit.id: limit for limit in declared}
        self.fair_declared = list(fair)
        self.fair_ready = False
        self.worker_id = worker_id
        self.enabled = False
        self.gate: ClaimGate | None = None
        self._loaded_at = 0.0
        self._unknown: set[str] = set()
        self.job = PeriodicJob(
            "cairnq.limits",
            self.reload,
            interval_ms=int(REFRESH_S * 1000),
            on_error=report,
            phase="limits",
            context={"worker_id": worker_id},
        )

    def in_use(self) -> bool:
        """Whether a limit is in force: only then do claims go through the book."""
        return self.gate is not None

    def governing(
        self, queues: Sequence[str], names: Sequence[str] | None, /
    ) -> list[Limit | FairShare]:
        gate = self.gate
        return [] if gate is None else gate.governing(queues, names)

    def claim(
        self,
        queues: Sequence[str],
        names: Sequence[str] | None,
        want: int,
        worker_id: str,
        lease_ms: int,
        governing: Sequence[Limit | FairShare],
        /,
    ) -> Op[list[Row]]:
        gate = self.gate
        assert gate is not None  # governing() found limits in force
        return gate.claim(queues, names, want, worker_id, lease_ms, governing)

    def begin(self) -> None:
        if self.gate is not None:
            self.gate.begin()

    def held_back(self) -> tuple[bool, int | None]:
        return (False, None) if self.gate is None else self.gate.held_back()

    async def start(self, *, ready: bool) -> None:
        """Store the declared limits and fair shares on a database with the limits tables
        (``ready``); without them, the book stays disabled (the limits extension refuses a
        worker that declares limits or fair shares there)."""
        if not ready:
            return
        self.enabled = True
        for limit in self.declared.values():
            await self.backend.arun(_limits.put(limit, source="worker"), write=True)
        self.fair_ready = await self.backend.arun(fair_ready(), write=False)
        for share in self.fair_declared:
            await self.backend.arun(put_share(share), write=True)
        await self.refresh(force=True)

    async def reload(self) -> None:
        """Reload the stored limits now (the job's tick)."""
        await self.refresh(force=True)

    async def refresh(self, *, force: bool = False) -> ClaimGate | None:
        """Reload the stored limits if a second has passed; returns the gate in force."""
        if not self.enabled:
            return None
        if not force and time.monotonic() - self._loaded_at < REFRESH_S:
            return self.gate
        stored = await self.backend.arun(_limits.list_with_tables(), write=False)
        shares = await self.backend.arun(list_shares(), write=False) if self.fair_ready else []
        self._loaded_at = time.monotonic()
        limits = []
        for limit in stored:
            mine = self.declared.get(limit.id)
            if mine is not None and mine.key == limit.key:
                limit = mine.with_amounts(_row_of(limit))
            elif limit.function_key and limit.id not in self._unknown:
                self._unknown.add(limit.id)
                log.warning(
                    "limit %r keys tasks by a function this worker does not declare; "
                    "the tasks it governs are left to workers that declare it",
                    limit.id,
                    extra={"worker_id": self.worker_id},
                )
            limits.append(limit)
        if not limits and not shares:
            self.gate = None
        elif self.gate is None:
            self.gate = ClaimGate(
                limits,
                keyed=FLAVOURS.get(self.backend.dialect),
                shares=shares,
                fair=FairClaimer(FLAVOURS.get(self.backend.dialect, "admit")),
            )
        else:
            self.gate.limits = limits
            self.gate.shares = shares
        return self.gate


def _row_of(limit: Limit) -> dict[str, object]:
    return {
        "kind": limit.kind,
        "amount": limit.amount,
        "scope": limit.scope,
        "target": limit.target,
        "key_path": limit.key,
        "period_ms": limit.period_ms,
        "burst": limit.burst,
        "source": limit.source,
    }
