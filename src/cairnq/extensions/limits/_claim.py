"""The limited claim: the limits' draw claimer, inside the worker's claim transaction.

A limited claim runs for the draws some limit governs. It locks the governing
limits' rows (PostgreSQL ``FOR UPDATE``; SQLite's write transaction is exclusive
already), so claims under one limit run one at a time; reads the running tasks per
key (``_ops.running_counts``); then walks the due tasks in claim order, a
page at a time, admitting each task whose every governing limit has room for its
key and skipping the others, so a saturated key never holds back another. The
admitted tasks are claimed, their function keys recorded and the rate buckets they
drew on written, all in that same transaction: the counts the next claim reads include them.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from ... import kernel
from ...errors import SerializationError, error_envelope
from ...models import Task
from ...protocol.steps import Call, Op, Row
from ._fair import FairClaimer, FairShare, fair_cap
from ._keyed import Flavour, keyed_fitting, keyed_limit, keyed_page
from ._model import Limit, LimitKeyError, key_text
from ._ops import database_now, running_counts

PAGE = 256
MIN_PAGE = 16
PRUNE_EVERY = 16
MAX_SCAN = 4096


@dataclass
class ClaimGate:
    """The limits a worker's claims honour, and what the last limited claim saw.

    ``limits``: the limits in force (refreshed from the database by the worker).
    ``retry_after_ms``: after a limited claim that admitted nothing for want of rate
    tokens, how long until the first such token is due (else ``None``).
    ``blocked``: due tasks limited claims passed over (over a limit) since the caller
    last reset it.
    ``keyed``: how the backend claims the common shape in one or two statements
    (``_keyed``), or ``None`` to claim every draw the general way.
    ``shares``: the fair shares in force (``_fair``), claimed through ``fair``.
    """

    limits: Sequence[Limit]
    retry_after_ms: int | None = None
    blocked: int = 0
    keyed: Flavour | None = None
    shares: Sequence[FairShare] = ()
    fair: FairClaimer | None = None
    _scan: int = field(default=MAX_SCAN, repr=False)
    _claims: int = field(default=0, repr=False)
    # Per keyed limit, whether its last keyed claim fit within it (see _keyed).
    _fit: dict[str, bool] = field(default_factory=dict, repr=False)

    def begin(self) -> None:
        """A claim is about to run: forget what the last one passed over and waited for."""
        self.blocked = 0
        self.retry_after_ms = None

    def held_back(self) -> tuple[bool, int | None]:
        """After a claim: whether it passed over due tasks, and ``retry_after_ms``."""
        return self.blocked > 0, self.retry_after_ms

    def governing(
        self, queues: Sequence[str], names: Sequence[str] | None
    ) -> list[Limit | FairShare]:
        """The limits and fair shares that can govern a draw of ``names`` (``None``: any)
        in ``queues``."""
        shared: list[Limit | FairShare] = [s for s in self.shares if s.queue in queues]
        return shared + [
            limit
            for limit in self.limits
            if (
                limit.target in queues
                if limit.scope == "queue"
                else names is None or limit.target in names
            )
        ]

    def claim(
        self,
        queues: Sequence[str],
        names: Sequence[str] | None,
        want: int,
        worker_id: str,
        lease_ms: int,
        rules: Sequence[Limit | FairShare],
    ) -> Op[list[Row]]:
        """Claim up to ``want`` due tasks that every governing limit has room for, shared
        among the keys of a fair share that governs the draw (``_fair``).

        Returns the claimed rows (``worker_id`` holding the claim's nonce), in claim order. A task
        whose key cannot be computed is claimed with ``refusal`` (an error
        envelope) for the worker to fail, counted against nothing.
        """
        limits = [rule for rule in rules if isinstance(rule, Limit)]
        shares = [rule for rule in rules if isinstance(rule, FairShare)]
        if shares and self.fair is not None and len(queues) == 1:
            fits, cap = fair_cap(shares[0], limits, queues[0])
            if fits:
                return (
                    yield from self._claim_fair(
                        shares[0], cap, queues, names, want, worker_id, lease_ms
                    )
                )
        if not limits:
            return (yield from kernel.claim_draw(queues, names, want, worker_id, lease_ms))
        keyed = keyed_limit(limits, queues, names) if self.keyed is not None else None
        if keyed is not None:
            return (yield from self._claim_keyed(keyed, queues, names, want, worker_id, lease_ms))
        ids = sorted(limit.id for limit in limits)
        locked = yield Call("limits_lock", {"names": ids})
        current = {row["name"]: row for row in locked}
        # The stored numbers win (an operator's change applies at the next claim); a limit
        # gone from the table governs nothing.
        active = [limit.with_amounts(current[limit.id]) for limit in limits if limit.id in current]
        if not active:
            return (yield from kernel.claim_draw(queues, names, want, worker_id, lease_ms))
        names_active = [limit.id for limit in active]
        self._claims += 1
        if self._claims % PRUNE_EVERY == 1:
            # Rows of tasks no longer running count for nothing (the count joins on
            # status); pruning now and then only keeps the table small.
            yield Call("limits_keys_prune", {"names": names_active})
        now = yield from database_now()
        running = yield from running_counts(active)
        buckets: dict[tuple[str, str], float] = {}
        rates = [limit for limit in active if limit.kind == "rate"]
        if rates:
            by_id = {limit.id: limit for limit in rates}
            stored = yield Call("limits_buckets", {"names": [limit.id for limit in rates]})
            for row in stored:
                limit = by_id[row["limit_name"]]
                buckets[(limit.id, row["key_value"])] = limit.refill(
                    float(row["tokens"]), now - int(row["refreshed_at_ms"])
                )
        admitted: list[tuple[Row, list[tuple[Limit, str]]]] = []
        refused: dict[str, dict[str, Any]] = {}
        rate_waits: list[int] = []
        blocked = 0
        cursor: tuple[Any, Any, Any] = (None, None, None)
        scanned = 0
        sieve = _sieve(active, queues, names, running)
        while len(admitted) + len(refused) < want and scanned < self._scan:
            # One queue's page is read in the claim index's order; several queues' are
            # gathered and sorted.
            page = yield Call(
                "limits_candidates_one_queue" if len(queues) == 1 else "limits_candidates",
                {
                    **({"queue": queues[0]} if len(queues) == 1 else {"queues": list(queues)}),
                    "names": None if names is None else list(names),
                    "now_ms": now,
                    "after_priority": cursor[0],
                    "after_run_at_ms": cursor[1],
                    "after_id": cursor[2],
                    **sieve,
                    "limit": min(PAGE, max(MIN_PAGE, 2 * want)),
                },
            )
            for row in page:
                scanned += 1
                cursor = (row["priority"], row["run_at_ms"], row["id"])
                governing = [lim for lim in active if lim.governs(row["queue"], row["name"])]
                try:
                    keys = _keys(row, governing)
                except LimitKeyError as exc:
                    refused[row["id"]] = error_envelope("LimitKeyError", "limit_key", str(exc))
                    if len(admitted) + len(refused) >= want:
                        break
                    continue
                if keys is None:
                    blocked += 1  # a function key this worker cannot compute
                    continue
                wait = _room(keys, running, buckets, now)
                if wait is not None:
                    blocked += 1
                    if wait > 0:
                        rate_waits.append(wait)
                    continue
                for limit, key in keys:
                    if limit.kind == "concurrency":
                        running[(limit.id, key)] = running.get((limit.id, key), 0) + 1
                    else:
                        buckets[(limit.id, key)] -= 1.0
                admitted.append((row, keys))
                if len(admitted) + len(refused) >= want:
                    break
            if len(page) < min(PAGE, max(MIN_PAGE, 2 * want)):
                break
        if sieve["skip_keys"]:
            blocked += 1  # the saturated keys' tasks were filtered out unseen, not claimed
        self.blocked += blocked
        self.retry_after_ms = min(rate_waits) if rate_waits and not admitted else None
        chosen = [row["id"] for row, _ in admitted] + list(refused)
        if not chosen:
            return []
        rows = yield from kernel.claim_ids(chosen, now, worker_id, lease_ms)
        claimed = {row["id"] for row in rows}
        # Only a function key is recorded: a path key is read back from the task's JSON.
        key_rows = [
            [row["id"], limit.id, key]
            for row, keys in admitted
            if row["id"] in claimed
            for limit, key in keys
            if limit.kind == "concurrency" and limit.function_key
        ]
        if key_rows:
            yield Call("limits_keys_put", {"rows": json.dumps(key_rows)})
        drawn = {
            (limit.id, key)
            for row, keys in admitted
            if row["id"] in claimed
            for limit, key in keys
            if limit.kind == "rate"
        }
        if drawn:
            spent = [[lid, key, buckets[(lid, key)], now] for lid, key in sorted(drawn)]
            yield Call("limits_buckets_put", {"rows": json.dumps(spent)})
        out: list[Row] = []
        for row in rows:
            if row["id"] in refused:
                out.append({**dict(row), "refusal": refused[row["id"]]})
            else:
                out.append(row)
        return sorted(out, key=lambda r: (-r["priority"], r["run_at_ms"], r["id"]))

    def _claim_fair(
        self,
        share: FairShare,
        cap: Limit | None,
        queues: Sequence[str],
        names: Sequence[str] | None,
        want: int,
        worker_id: str,
        lease_ms: int,
    ) -> Op[list[Row]]:
        """``claim`` for a draw of one shared queue, capped per key by ``cap`` if any."""
        assert self.fair is not None
        rows, held, rest = yield from self.fair.claim(share, cap, names, want, worker_id, lease_ms)
        if held:
            self.blocked += 1
        self.retry_after_ms = None
        if rest:
            left = want - len(rows)
            if cap is None:
                more = yield from kernel.claim_draw(queues, names, left, worker_id, lease_ms)
            elif self.keyed is not None:
                more = yield from self._claim_keyed(cap, queues, names, left, worker_id, lease_ms)
            else:
                more = yield from self.claim(queues, names, left, worker_id, lease_ms, [cap])
            rows = rows + list(more)
        return rows

    def _claim_keyed(
        self,
        limit: Limit,
        queues: Sequence[str],
        names: Sequence[str] | None,
        want: int,
        worker_id: str,
        lease_ms: int,
    ) -> Op[list[Row]]:
        """``claim`` for a draw one path-keyed concurrency limit governs alone, a page at
        a time (``_keyed.keyed_page``), each claiming what it admits, until ``want`` are
        claimed or the pages run out; first in one lighter statement while the limit's
        last claim fit within it (``_keyed.keyed_fitting``).

        The lock's rows are not read (the statements read the stored amount), so a
        pipelining backend sends the lock with the first statement after it. The lock
        and the fitting claim are a whole transaction (``Call.apart``): where they begin
        the claim, PostgreSQL commits them at once, with no transaction block, and the
        pages after them, if it claimed nothing, take the lock again in a transaction
        of their own. The pages are one transaction: a page that claimed must not be
        committed while a later one may still fail.
        """
        assert self.keyed is not None
        locks = held = self.keyed == "claim"
        lock = Call("limits_lock", {"names": [limit.id]}, discard=True, apart=locks)
        if locks:
            yield lock
        self._claims += 1
        if self._claims % PRUNE_EVERY == 1:
            yield Call("limits_keys_prune", {"names": [limit.id]}, discard=True, apart=locks)
        claimed: list[Row] = []
        refused: dict[str, dict[str, Any]] = {}
        paging = True
        if self._fit.get(limit.id, True):
            # No more than the pages would scan: a claim takes the same many either way.
            fitting = yield from keyed_fitting(
                limit, queues, names, min(want, self._scan), worker_id, lease_ms, apart=locks
            )
            _take_keyed(fitting, limit, claimed, refused)
            # It took every due task the pages would have admitted; nothing taken, the
            # claim may not fit (or nothing is due): the pages decide.
            paging = not fitting
            held = False
        now: int | None = None
        cursor: tuple[Any, Any, Any] = (None, None, None)
        # The first page holds as many tasks as the claim wants: where no key is full
        # it admits them all, and on PostgreSQL every task a page reads is locked until
        # the pages commit, claimed or not. Each later page doubles.
        size = min(PAGE, max(MIN_PAGE, want))
        scanned = blocked = 0
        while paging and len(claimed) < want and scanned < self._scan:
            if locks and not held:
                yield Call("limits_lock", {"names": [limit.id]}, discard=True)
                held = True
            rows, seen, now = yield from keyed_page(
                self.keyed,
                limit,
                queues,
                names,
                want - len(claimed),
                size,
                worker_id,
                lease_ms,
                now,
                cursor,
            )
            if not scanned:
                self._fit[limit.id] = seen.fits
            cursor = seen.cursor
            scanned += seen.rows
            if seen.full_keys:
                blocked += 1  # the full keys' tasks were left out unseen, not claimed
            if len(claimed) + len(rows) < want:
                blocked += seen.rows - len(rows)
            _take_keyed(rows, limit, claimed, refused)
            if seen.rows < size:
                break
            size = min(PAGE, 2 * size)
        self.blocked += blocked
        self.retry_after_ms = None
        out = [
            {**row, "refusal": refused[row["id"]]} if row["id"] in refused else row
            for row in claimed
        ]
        return sorted(out, key=lambda r: (-r["priority"], r["run_at_ms"], r["id"]))


def _take_keyed(
    rows: Sequence[tuple[Row, str | None]],
    limit: Limit,
    claimed: list[Row],
    refused: dict[str, dict[str, Any]],
) -> None:
    """Add a keyed claim's rows to ``claimed``, and to ``refused`` with the reason each
    whose key is none: one the statement could not compute (it would count against
    nothing; Python's rule names the reason, or, should the two rules ever differ, this
    one) or one the key rule refuses (over 1000 bytes, which the page statements already
    return as none and the fitting claim returns as it is)."""
    source = f"limit {limit.id!r}: {limit.key}"
    for row, key in rows:
        try:
            if key is None:
                _keys(row, [limit])
                raise LimitKeyError(f"{source} gave no key the database reads")
            if limit.key is not None:
                key_text(key, source)
        except LimitKeyError as exc:
            refused[row["id"]] = error_envelope("LimitKeyError", "limit_key", str(exc))
        claimed.append(row)


def _sieve(
    active: Sequence[Limit],
    queues: Sequence[str],
    names: Sequence[str] | None,
    running: dict[tuple[str, str], int],
) -> dict[str, Any]:
    """The candidate statement's key filter: the keys a path-keyed concurrency limit that
    governs every task of the draw has saturated, so the page never holds their tasks.

    Only such a limit may filter (a limit governing part of the draw would hide tasks
    it does not govern); the rest are checked task by task. The statement derives each
    task's key text by ``key_text``'s rule, so it leaves out exactly the tasks whose key
    Python would find saturated, and never one whose value the rule refuses (that task
    must reach ``_keys`` to fail with ``LimitKeyError``).
    """
    for limit in active:
        whole = limit.governs_every_task_of(queues, names)
        if limit.kind != "concurrency" or limit.json_path is None or not whole:
            continue
        full = sorted(
            key for (lid, key), n in running.items() if lid == limit.id and n >= limit.amount
        )
        if full:
            return {"key_root": limit.key_root, "key_path": limit.json_path, "skip_keys": full}
    return {"key_root": None, "key_path": None, "skip_keys": None}


def _decoded(value: Any) -> Any:
    if isinstance(value, (str, bytes)):
        return json.loads(value)
    return value


def _keys(row: Row, governing: Sequence[Limit]) -> list[tuple[Limit, str]] | None:
    """Each governing limit with the key ``row`` counts under; ``None`` when a function
    key is not known here.

    Raises:
        LimitKeyError: a key cannot be computed (the task cannot be read, a path is
            missing, a key function raised or returned a non-string).
    """
    if not governing:
        return []
    if any(limit.function_key and limit.key_function is None for limit in governing):
        return None
    keys = []
    for limit in governing:
        if limit.key is None:
            keys.append((limit, ""))
            continue
        try:
            if limit.key_function is not None:
                keys.append((limit, limit.key_of(Task.from_row(row))))
                continue
            root = limit.key.split(".")[0]
            fields = _decoded(row[root])
        except (SerializationError, ValueError) as exc:
            raise LimitKeyError(f"limit {limit.id!r}: the task cannot be read: {exc}") from exc
        keys.append((limit, limit.key_in(fields, fields)))
    return keys


def _room(
    keys: Sequence[tuple[Limit, str]],
    running: dict[tuple[str, str], int],
    buckets: dict[tuple[str, str], float],
    now: int,
) -> int | None:
    """``None`` when every limit has room for its key; else how long until the rate
    limits would (0 when a concurrency limit is what refuses). New buckets start full."""
    wait = 0
    refused = False
    for limit, key in keys:
        if limit.kind == "concurrency":
            if running.get((limit.id, key), 0) >= limit.amount:
                return 0
        else:
            level = buckets.setdefault((limit.id, key), float(limit.burst or limit.amount))
            if level < 1.0:
                refused = True
                wait = max(wait, limit.wait_ms(level))
    return wait if refused else None
