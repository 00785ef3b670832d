"""The limited claim: the limits' draw claimer, inside the worker's claim transaction.

A limited claim runs for the draws some limit governs. Each concurrency limit keeps a
running count per key (``cairnq_limit_counts``, x0030). The claim reads one page of due
tasks in claim order with each task's key and its key's count (``limits_page``; the
tasks of keys at their limit left out when one limit governs the whole draw), admits
each task whose every governing limit has room for its key, and adds the admitted
tasks to their keys' counts (``limits_take``), which grants a key only the room its
limit has left under that key's row lock: claims of other keys never wait, and a claim
that read a count another claim has since raised takes only what is left. The admitted
tasks are then claimed, in the same transaction. A one-limit draw is those three
statements; other draws first read the limits and their counts, and rate limits lock
their limits' rows for their buckets, as before.

A settlement or recovery by a cairnq worker takes its tasks from their keys' counts
(``LimitBook.attempt_end``); what a reference SDK worker settles or recovers, and rows
purged or truncated, the book's reconciliation corrects (``reconcile``).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from ... import kernel
from ...errors import SerializationError, error_envelope
from ...models import Task
from ...protocol.steps import NOW, Call, Op, Row
from ._model import Limit, LimitKeyError, key_text
from ._ops import database_now

PAGE = 256
MIN_PAGE = 16
MAX_SCAN = 4096


@dataclass
class ClaimGate:
    """The limits a worker's claims honour, and what the last limited claim saw.

    ``limits``: the limits in force (refreshed from the database by the worker).
    ``retry_after_ms``: after a limited claim that admitted nothing for want of rate
    tokens, how long until the first such token is due (else ``None``).
    ``blocked``: due tasks limited claims passed over (over a limit) since the caller
    last reset it.
    ``full``: whether a claim passed over a task of a key at its concurrency limit
    since the caller last reset it (the book then reconciles the counts soon).
    """

    limits: Sequence[Limit]
    retry_after_ms: int | None = None
    blocked: int = 0
    full: bool = False
    _scan: int = field(default=MAX_SCAN, repr=False)

    def begin(self) -> None:
        """A claim is about to run: forget what the last one passed over and waited for."""
        self.blocked = 0
        self.retry_after_ms = None

    def held_back(self) -> tuple[bool, int | None]:
        """After a claim: whether it passed over due tasks, and ``retry_after_ms``."""
        return self.blocked > 0, self.retry_after_ms

    def governing(self, queues: Sequence[str], names: Sequence[str] | None) -> list[Limit]:
        """The limits that can govern a draw of ``names`` (``None``: any) in ``queues``."""
        return [
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
        limits: Sequence[Limit],
    ) -> Op[list[Row]]:
        """Claim up to ``want`` due tasks that every governing limit has room for.

        Returns the claimed rows (``worker_id`` holding the claim's nonce), in claim order. A task
        whose key cannot be computed is claimed with ``refusal`` (an error
        envelope) for the worker to fail, counted against nothing.
        """
        paged = _paged(limits, queues, names)
        running: dict[tuple[str, str], int] = {}
        buckets: dict[tuple[str, str], float] = {}
        now: Any = NOW
        if len(limits) == 1 and paged is not None:
            # The page reads the one limit's stored amount and its keys' counts.
            active: list[Limit] = [paged]
        else:
            rates = [limit for limit in limits if limit.kind == "rate"]
            ids = sorted(limit.id for limit in limits)
            # Rate buckets are read and written back: their limits' rows are locked.
            stored = yield Call("limits_lock" if rates else "limits_read", {"names": ids})
            current = {row["name"]: row for row in stored}
            # The stored numbers win (an operator's change applies at the next claim); a
            # limit gone from the table governs nothing.
            active = [lim.with_amounts(current[lim.id]) for lim in limits if lim.id in current]
            if not active:
                return (yield from kernel.claim_draw(queues, names, want, worker_id, lease_ms))
            counted = [limit.id for limit in active if limit.kind == "concurrency"]
            if counted:
                for row in (yield Call("limits_counts", {"names": counted})):
                    running[(row["limit_name"], row["key_value"])] = int(row["running"])
            paged = _paged(active, queues, names)
            if any(limit.kind == "rate" for limit in active):
                now = yield from database_now()
                yield from _read_buckets(active, now, buckets)
        admitted: list[tuple[Row, list[tuple[Limit, str]]]] = []
        refused: dict[str, dict[str, Any]] = {}
        rate_waits: list[int] = []
        blocked = 0
        full = False
        cursor: tuple[Any, Any, Any] = (None, None, None)
        scanned = 0
        size = min(PAGE, max(MIN_PAGE, 2 * want))
        sieve = paged is not None and paged.key is not None
        while len(admitted) + len(refused) < want and scanned < self._scan:
            one = len(queues) == 1
            page = yield Call(
                "limits_page_one_queue" if one else "limits_page",
                {
                    **({"queue": queues[0]} if one else {"queues": list(queues)}),
                    "names": None if names is None else list(names),
                    "now_ms": now,
                    "after_priority": cursor[0],
                    "after_run_at_ms": cursor[1],
                    "after_id": cursor[2],
                    "limit_name": None if paged is None else paged.id,
                    "key_root": None if paged is None else (paged.key or "").split(".")[0],
                    "key_path": None if paged is None else paged.json_path,
                    "sieve": sieve,
                    "skip_keys": _filled(paged, running) if sieve else None,
                    "limit": size,
                },
            )
            if page and paged is not None and len(active) == 1:
                if page[0]["limit_amount"] is None:  # the limit is gone: it governs nothing
                    return (yield from kernel.claim_draw(queues, names, want, worker_id, lease_ms))
                paged = replace(paged, amount=int(page[0]["limit_amount"]))
                active = [paged]
            stop = False
            for row in page:
                scanned += 1
                cursor = (row["priority"], row["run_at_ms"], row["id"])
                governing = [lim for lim in active if lim.governs(row["queue"], row["name"])]
                try:
                    keys = _keys(row, governing, paged)
                except LimitKeyError as exc:
                    refused[row["id"]] = error_envelope("LimitKeyError", "limit_key", str(exc))
                    if len(admitted) + len(refused) >= want:
                        break
                    continue
                if keys is None:
                    blocked += 1  # a function key this worker cannot compute
                    continue
                if paged is not None and row["limit_key"] is not None:
                    running.setdefault((paged.id, row["limit_key"]), int(row["limit_running"]))
                wait = _room(keys, running, buckets, now)
                if wait is not None:
                    blocked += 1
                    if wait > 0:
                        rate_waits.append(wait)
                    else:
                        full = True
                        if paged is not None and paged.key is None and len(active) == 1:
                            stop = True  # one key for the whole draw, and it is full
                            break
                    continue
                for limit, key in keys:
                    if limit.kind == "concurrency":
                        running[(limit.id, key)] = running.get((limit.id, key), 0) + 1
                    else:
                        buckets[(limit.id, key)] -= 1.0
                admitted.append((row, keys))
                if len(admitted) + len(refused) >= want:
                    break
            if stop or len(page) < size:
                break
        if sieve and (scanned >= size or not admitted):
            # The sieve may have left out tasks of full keys unseen.
            blocked += 1
            full = True
        self.blocked += blocked
        self.full = self.full or full
        self.retry_after_ms = min(rate_waits) if rate_waits and not admitted else None
        kept = yield from _take(admitted)
        if kept and any(limit.kind == "rate" for limit in active):
            drawn = {
                (limit.id, key)
                for row, keys in admitted
                if row["id"] in kept
                for limit, key in keys
                if limit.kind == "rate"
            }
            if drawn:
                spent = [[lid, key, buckets[(lid, key)], now] for lid, key in sorted(drawn)]
                yield Call("limits_buckets_put", {"rows": json.dumps(spent)})
        chosen = [row["id"] for row, _ in admitted if row["id"] in kept] + list(refused)
        if not chosen:
            return []
        rows = yield from kernel.claim_ids(chosen, now, worker_id, lease_ms)
        out: list[Row] = []
        for row in rows:
            if row["id"] in refused:
                out.append({**dict(row), "refusal": refused[row["id"]]})
            else:
                out.append(row)
        return sorted(out, key=lambda r: (-r["priority"], r["run_at_ms"], r["id"]))


def _paged(
    limits: Sequence[Limit], queues: Sequence[str], names: Sequence[str] | None
) -> Limit | None:
    """The concurrency limit the page counts by: one with a path key or none, governing
    every task of the draw (a limit governing part of it would count tasks it does not
    govern); ``None`` when no limit fits."""
    for limit in limits:
        whole = (limit.scope == "queue" and list(queues) == [limit.target]) or (
            limit.scope == "name" and names is not None and list(names) == [limit.target]
        )
        if limit.kind == "concurrency" and not limit.function_key and whole:
            return limit
    return None


def _filled(paged: Limit | None, running: dict[tuple[str, str], int]) -> list[str] | None:
    """The keys of ``paged`` at its limit by this claim's own count, for the next page
    to leave out (``None``: none)."""
    if paged is None:
        return None
    full = [key for (lid, key), n in running.items() if lid == paged.id and n >= paged.amount]
    return sorted(full) or None


def _read_buckets(
    active: Sequence[Limit], now: int, buckets: dict[tuple[str, str], float]
) -> Op[None]:
    rates = {limit.id: limit for limit in active if limit.kind == "rate"}
    stored = yield Call("limits_buckets", {"names": list(rates)})
    for row in stored:
        limit = rates[row["limit_name"]]
        buckets[(limit.id, row["key_value"])] = limit.refill(
            float(row["tokens"]), now - int(row["refreshed_at_ms"])
        )


def _take(admitted: Sequence[tuple[Row, list[tuple[Limit, str]]]]) -> Op[set[str]]:
    """Add the admitted tasks to their keys' counts; the ids of those every concurrency
    limit granted. A task some limit refused (another claim took the room first) gives
    back what the others granted it."""
    ranks: dict[tuple[str, str], int] = {}
    rows: list[list[Any]] = []
    for row, keys in admitted:
        for limit, key in keys:
            if limit.kind == "concurrency":
                rank = ranks[(limit.id, key)] = ranks.get((limit.id, key), 0) + 1
                rows.append([row["id"], limit.id, key, rank])
    ids = {row["id"] for row, _ in admitted}
    if not rows:
        return ids
    granted = yield Call("limits_take", {"rows": json.dumps(rows, ensure_ascii=False)})
    got = {(g["task_id"], g["limit_name"]) for g in granted}
    kept = set(ids)
    for task_id, limit_id, _, _ in rows:
        if (task_id, limit_id) not in got:
            kept.discard(task_id)
    back = sorted({task_id for task_id, _ in got} - kept)
    if back:
        yield Call("limits_release", {"ids": back})
    return kept


def reconcile(names: Sequence[str]) -> Op[int]:
    """Correct the named limits' running counts from the running tasks: forget the keys
    recorded for tasks no longer running (settled or recovered by a reference SDK worker,
    purged), then set every count that differs from its recorded keys to their number
    (keys forgotten without their count: a truncate, the sweep). Returns how many keys'
    counts it corrected."""
    pruned = yield Call("limits_keys_prune", {"names": list(names)})
    corrected = {(row["limit_name"], row["key_value"]) for row in pruned}
    wrong = yield Call("limits_counts_lock", {"names": list(names)})
    if wrong:
        pairs = [[row["limit_name"], row["key_value"]] for row in wrong]
        fixed = yield Call("limits_counts_fix", {"rows": json.dumps(pairs, ensure_ascii=False)})
        corrected.update((row["limit_name"], row["key_value"]) for row in fixed)
    return len(corrected)


def release(ids: Sequence[str]) -> Op[None]:
    """Take the tasks ``ids``, whose attempts ended, from their keys' running counts."""
    yield Call("limits_release", {"ids": list(ids)})


def _decoded(value: Any) -> Any:
    if isinstance(value, (str, bytes)):
        return json.loads(value)
    return value


def _keys(
    row: Row, governing: Sequence[Limit], paged: Limit | None = None
) -> list[tuple[Limit, str]] | None:
    """Each governing limit with the key ``row`` counts under; ``None`` when a function
    key is not known here. The page's key (``limit_key``) serves ``paged`` when the key
    rule takes it, without decoding the task.

    Raises:
        LimitKeyError: a key cannot be computed (the task cannot be read, a path is
            missing, a key function raised or returned a non-string).
    """
    if not governing:
        return []
    if any(limit.function_key and limit.key_function is None for limit in governing):
        return None
    keys = []
    fields: Any = None
    for limit in governing:
        if limit.key is None:
            keys.append((limit, ""))
            continue
        if paged is not None and limit.id == paged.id and row["limit_key"] is not None:
            try:
                keys.append((limit, key_text(row["limit_key"], limit.id)))
                continue
            except LimitKeyError:
                pass  # the key rule's own error, from the task itself, below
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
