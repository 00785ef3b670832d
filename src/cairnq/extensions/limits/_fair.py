"""Fair share: a queue's workers shared among the values of a key (tenants).

A ``FairShare`` is stored in ``cairnq_fair_shares`` (migration ``x0022_fair_share.sql``).
Every task inserted into a shared queue gets its key recorded in ``cairnq_fair_tasks``
by a trigger, whoever submits it; a fair claim walks the queue's distinct keys and
takes the first tasks of each, admitting them by ``(running + nth) / weight``, fewest
first. Round-robin with equal weights; in proportion to the weights otherwise; and
work-conserving: a key alone gets every worker. A keyed concurrency limit on the same
queue and key caps each key on top (``Limit.concurrency(..., key=<the same path>)``).

A task whose key the rule refuses (see ``_model.key_text``) is not shared: it is
claimed in queue order once the shared tasks leave room in a claim.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ... import kernel
from ...errors import InvalidArgument, SchemaIncomplete
from ...protocol.steps import NOW, Call, Op, Row
from ._keyed import Flavour
from ._model import MAX_LIMIT, Limit, LimitKeyError, _key_path, key_text
from ._ops import database_now

__all__ = ["FairShare"]

FAIR_MIGRATION = "x0022_fair_share.sql"
PRUNE_EVERY = 16


def _weights(weights: Any) -> tuple[tuple[str, int], ...]:
    if weights is None:
        return ()
    if not isinstance(weights, Mapping):
        raise InvalidArgument(
            f"weights must be a mapping of key to weight, not {type(weights).__name__}"
        )
    out: dict[str, int] = {}
    for key, weight in weights.items():
        try:
            text = key_text(key, "a weight's key")
        except LimitKeyError as exc:
            raise InvalidArgument(f"weights: {exc}") from None
        if isinstance(weight, bool) or not isinstance(weight, int):
            raise InvalidArgument(
                f"weights: the weight of {text!r} must be an integer, not {type(weight).__name__}"
            )
        if not 1 <= weight <= MAX_LIMIT:
            raise InvalidArgument(
                f"weights: the weight of {text!r} must be between 1 and {MAX_LIMIT}, got {weight}"
            )
        if text in out:
            raise InvalidArgument(f"weights: the key {text!r} is given twice")
        out[text] = weight
    return tuple(sorted(out.items()))


@dataclass(frozen=True, init=False)
class FairShare:
    """A queue whose workers are shared among the values of a key (tenants).

    Every cairnq worker claiming from the queue takes the next task of the key with the
    fewest running tasks per weight, instead of the oldest task of the queue: a tenant
    that submitted 10,000 tasks first does not hold back one that submitted 100 after
    it. A key alone gets every worker (nothing is held back for keys with no work).

    Args:
        queue: The shared queue (one share per queue).
        key: A path into the payload or the metadata (``"payload.tenant"``,
            ``"metadata.account.id"``); a value is a non-empty string or an integer
            (``7`` and ``"7"`` are one key), as for ``Limit.concurrency``.
        weights: A key's weight (default 1): a key of weight 3 runs about three tasks
            for each one of a key of weight 1 while both have work.

    Raises:
        InvalidArgument: an empty or non-string queue, a key that is not such a path,
            weights that are not a mapping of key to an integer from 1 to 2**31 - 1.

    Example::

        worker = Worker(cq, queues=["reports"], extensions=[Limits(fair=[
            FairShare(queue="reports", key="payload.tenant", weights={"acme": 2}),
        ])])
    """

    queue: str
    key: str
    weights: tuple[tuple[str, int], ...] = field(default=())

    def __init__(
        self, *, queue: str, key: str, weights: Mapping[str | int, int] | None = None
    ) -> None:
        if not isinstance(queue, str) or not queue:
            raise InvalidArgument("a fair share's queue must be a non-empty string")
        if not isinstance(key, str):
            raise InvalidArgument(
                f"a fair share's key must be a path string, not {type(key).__name__}"
            )
        object.__setattr__(self, "queue", queue)
        object.__setattr__(self, "key", _key_path(key))
        object.__setattr__(self, "weights", _weights(weights))

    @property
    def id(self) -> str:
        """The name its running tasks are counted under (``cairnq_limit_keys``)."""
        return f"fair:{self.queue}"

    @property
    def key_root(self) -> str:
        """``"payload"`` or ``"metadata"``."""
        return self.key.split(".")[0]

    @property
    def json_path(self) -> str:
        """The key as a JSON path into its root column (``$."tenant"``)."""
        return "$" + "".join(f'."{part}"' for part in self.key.split(".")[1:])

    def weight(self, key: str) -> int:
        """The weight of ``key`` (1 unless given)."""
        return dict(self.weights).get(key, 1)

    @classmethod
    def from_row(cls, row: Mapping[str, Any]) -> FairShare:
        """A share as stored in ``cairnq_fair_shares``."""
        root, path = row["key_root"], row["key_path"]
        parts = [part.strip('"') for part in str(path).split(".")[1:]]
        weights = json.loads(row["weights"]) if isinstance(row["weights"], str) else {}
        return cls(queue=row["queue"], key=".".join([root, *parts]), weights=weights)


def check_fair(shares: Sequence[FairShare] | None) -> list[FairShare]:
    """The fair shares a worker declares: ``FairShare`` values, one per queue.

    Raises:
        InvalidArgument: something else was given, or two shares name one queue.
    """
    if shares is None:
        return []
    if isinstance(shares, FairShare):
        raise InvalidArgument("fair must be a list of FairShare values, not a single FairShare")
    if isinstance(shares, (str, bytes, Mapping)) or not hasattr(shares, "__iter__"):
        raise InvalidArgument(
            f"fair must be a list of FairShare values, not {type(shares).__name__}"
        )
    out: list[FairShare] = []
    for share in shares:
        if not isinstance(share, FairShare):
            raise InvalidArgument(
                f"fair entries must be FairShare values, not {type(share).__name__}"
            )
        if any(seen.queue == share.queue for seen in out):
            raise InvalidArgument(f"two fair shares name the queue {share.queue!r}; give one")
        out.append(share)
    return out


def fair_ready() -> Op[bool]:
    """Whether the database has the fair share's tables (``x0022_fair_share.sql``)."""
    applied = yield from kernel.applied_migrations()
    return FAIR_MIGRATION in applied


def put_share(share: FairShare) -> Op[None]:
    """Store ``share`` and record the keys of the queue's queued and running tasks when
    the queue was not shared, or was shared by another key.

    Raises:
        SchemaIncomplete: the database lacks ``x0022_fair_share.sql``.
    """
    if not (yield from fair_ready()):
        raise SchemaIncomplete(
            f"this database lacks cairnq's fair share (migration {FAIR_MIGRATION}); "
            "run `cairnq migrate` to add it",
            missing=(FAIR_MIGRATION,),
        )
    stored = yield from list_shares()
    before = [s for s in stored if s.queue == share.queue]
    armed = yield Call("limits_fair_armed", {})
    if not armed[0]["armed"]:
        # The insert trigger exists only while a queue is shared (on SQLite): the tasks
        # inserted without it into queues already shared are recorded now.
        yield Call("limits_fair_arm", {})
        for other in stored:
            if other.queue != share.queue or other.key == share.key:
                yield from _index(other)
    yield Call(
        "limits_fair_put",
        {
            "queue": share.queue,
            "key_root": share.key_root,
            "key_path": share.json_path,
            "weights": json.dumps(dict(share.weights)),
            "now_ms": NOW,
        },
    )
    if before and before[0].key == share.key:
        return
    yield Call("limits_fair_unindex", {"queue": share.queue})
    yield from _index(share)


def _index(share: FairShare) -> Op[None]:
    """Record the keys of ``share``'s queued and running tasks (those not recorded yet)."""
    params = {"queue": share.queue, "key_root": share.key_root, "key_path": share.json_path}
    yield Call("limits_fair_index", params)


def remove_share(queue: str) -> Op[bool]:
    """Stop sharing ``queue`` (its tasks' recorded keys go with it); whether it was shared."""
    rows = yield Call("limits_fair_delete", {"queue": queue})
    yield Call("limits_fair_unindex", {"queue": queue})
    return bool(rows)


def list_shares() -> Op[list[FairShare]]:
    """Every stored fair share, by queue."""
    rows = yield Call("limits_fair_list", {})
    return [FairShare.from_row(row) for row in rows]


def fair_cap(share: FairShare, limits: Sequence[Limit], queue: str) -> tuple[bool, Limit | None]:
    """Whether a fair claim can honour ``limits`` with ``share`` on ``queue``, and the
    limit that caps each key on top (``None``: none). One concurrency limit keyed by
    the share's own path and governing the whole queue is the shape it can; other
    limits are then enforced without the fair order."""
    if not limits:
        return True, None
    limit = limits[0]
    if (
        len(limits) != 1
        or limit.kind != "concurrency"
        or limit.key != share.key
        or not limit.governs_every_task_of([queue], None)
    ):
        return False, None
    return True, limit


@dataclass
class FairClaimer:
    """The fair claims of one worker run (counts its claims, to prune now and then)."""

    flavour: Flavour
    claims: int = 0

    def claim(
        self,
        share: FairShare,
        cap: Limit | None,
        names: Sequence[str] | None,
        want: int,
        worker_id: str,
        lease_ms: int,
    ) -> Op[tuple[list[Row], bool, bool]]:
        """Claim up to ``want`` tasks of ``share``'s queue fairly. Returns the claimed
        rows in claim order, whether ``cap`` held back tasks, and whether the caller
        should claim what is left of ``want`` in queue order (the tasks without a
        recorded key), through ``cap`` if any."""
        count_name = share.id if cap is None else cap.id
        if self.flavour == "claim":
            yield Call("limits_fair_lock", {"queue": share.queue}, discard=True)
            if cap is not None:
                yield Call("limits_lock", {"names": [cap.id]}, discard=True)
        self.claims += 1
        if self.claims % PRUNE_EVERY == 1:
            yield Call("limits_fair_prune", {"queue": share.queue}, discard=True)
            yield Call("limits_keys_prune", {"names": [count_name]}, discard=True)
        params = {
            "queue": share.queue,
            "names": None if names is None else list(names),
            "want": want,
            "count_name": count_name,
            "cap_limit": None if cap is None else cap.id,
            "key_root": share.key_root,
            "key_path": share.json_path,
        }
        if self.flavour == "claim":
            rows: list[Row] = [
                {k: v for k, v in dict(row).items() if k != "limit_key"}
                for row in (
                    yield Call(
                        "limits_fair_claim",
                        {
                            **params,
                            "now_ms": NOW,
                            "worker_id": kernel.claimant(worker_id, False),
                            "lease_ms": lease_ms,
                        },
                    )
                )
            ]
        else:
            now = yield from database_now()
            chosen = yield Call("limits_fair_admit", {**params, "now_ms": now})
            keys = {row["id"]: row["limit_key"] for row in chosen}
            rows = []
            if keys:
                rows = list((yield from kernel.claim_ids(list(keys), now, worker_id, lease_ms)))
                if cap is None:
                    # A cap counts the running tasks' own keys; the share alone, its records.
                    recorded = [[r["id"], count_name, keys[r["id"]]] for r in rows]
                    yield Call("limits_keys_put", {"rows": json.dumps(recorded)}, discard=True)
        held = cap is not None and len(rows) < want
        if len(rows) < want and (cap is None or self.claims % PRUNE_EVERY == 1):
            # The tasks no key was recorded for (the key rule refused it), in queue
            # order: every claim without a cap (a claim short of want has taken every
            # shared task due), now and then under a cap (the caller's limited claim).
            return sorted(rows, key=_order), held, True
        return sorted(rows, key=_order), held, False


def _order(row: Row) -> tuple[Any, ...]:
    return (-row["priority"], row["run_at_ms"], row["id"])
