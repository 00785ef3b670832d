"""A submit under a ``Policy``: one transaction that decides it under the key's lock (and
the throttle key's), then stores the task through the kernel's keyed submit.

Locks are taken in one order by every submit: the throttle key's (``uniqueness_lock``,
its own lock space), then the key's (``lock_key``, which the kernel's keyed submit
takes again and which a plain keyed submit takes alone). So two submits never wait on
each other in a cycle.
"""

from __future__ import annotations

from ... import kernel
from ...kernel import NewTask, Points
from ...models import Task
from ...protocol.steps import NOW, Call, Op
from ..workflows._ops import PARKED_RUN_AT_MS
from ._model import NotUnique, Period, Policy, Throttled, debounced


def submit(spec: NewTask, policy: Policy, points: Points) -> Op[list[Task]]:
    """Store ``spec`` as ``policy`` says; the stored task, alone in a list.

    - ``throttle``: refused (``Throttled``) when the throttle key holds its limit
      of tasks enqueued within their period; a task this submit inserts counts
      from now (one the key reuses does not).
    - ``unique_for``: within the key's period, the period's task is handed back
      (``NotUnique`` under ``conflict="reject"`` or when it was purged); with no
      period running, the kernel's keyed submit decides, and the task it gives
      (inserted, or the key's live one it reuses) starts a period from now.
    - ``debounce``: the key's task, queued and never started (of the same name and
      queue), takes this submit's payload and metadata and is due ``debounce``
      from now; otherwise the kernel's keyed submit decides, due ``debounce`` from now.

    Raises:
        Throttled, NotUnique, AlreadyExists: nothing is written.
    """
    if policy.throttle_key is not None:
        yield from _check_throttle(policy)
    key = spec.key
    if key is not None:
        yield Call("lock_key", {"key": key})
    if key is not None and policy.unique_for_ms is not None:
        period = yield Call("uniqueness_period", {"key": key, "now_ms": NOW})
        if period:
            task_id, until_ms = str(period[0]["task_id"]), int(period[0]["until_ms"])
            current = yield from kernel.get(task_id)
            if current is None or spec.conflict == "reject":
                raise NotUnique(key, task_id, until_ms, purged=current is None)
            return [current]
    spec = debounced(spec, policy)
    if key is not None and policy.debounce_ms is not None:
        revised = yield from _revise_pending(key, spec)
        if revised is not None:
            return [revised]
    task = yield from kernel.submit(spec, points=points)
    if key is not None and policy.unique_for_ms is not None:
        # No period runs: the task this submit gets, inserted or the key's own, starts one.
        yield Call(
            "uniqueness_period_put",
            {"key": key, "task_id": task.id, "period_ms": policy.unique_for_ms, "now_ms": NOW},
            discard=True,
        )
        yield Call("uniqueness_sweep", {"now_ms": NOW}, discard=True)
    if task.id == spec.id and policy.throttle_key is not None:
        yield Call(
            "uniqueness_throttle_put",
            {"key": policy.throttle_key, "task_id": task.id, "per_ms": policy.throttle_per_ms,
             "now_ms": NOW},
            discard=True,
        )  # fmt: skip
        yield Call("uniqueness_throttle_sweep", {"now_ms": NOW}, discard=True)
    return [task]


def _check_throttle(policy: Policy) -> Op[None]:
    key = policy.throttle_key
    yield Call("uniqueness_lock", {"key": key})
    rows = yield Call("uniqueness_throttle_count", {"key": key, "now_ms": NOW})
    held = int(rows[0]["held"])
    limit, per_ms = policy.throttle_limit or 0, policy.throttle_per_ms or 0
    if held >= limit:
        retry_after = int(rows[0]["first_until_ms"]) - int(rows[0]["now_ms"])
        raise Throttled(str(key), limit, per_ms, max(retry_after, 0))


def _revise_pending(key: str, spec: NewTask) -> Op[Task | None]:
    """The key's task revised to ``spec`` when it is queued, never started, of
    ``spec``'s name and queue, and not parked behind its dependencies; else ``None``
    (nothing written)."""
    pointer = yield Call("get_key", {"key": key})
    if not pointer:
        return None
    # Locked, so no claim takes it between this look and the revision.
    rows = yield Call("get_for_update", {"id": pointer[0]["task_id"]})
    if not rows:
        return None
    row = rows[0]
    if (
        row["status"] != "queued"
        or int(row["attempt"]) != 0
        or row["name"] != spec.name
        or row["queue"] != spec.queue
        or int(row["run_at_ms"]) >= PARKED_RUN_AT_MS  # waiting for its dependencies
    ):
        return None
    return (yield from kernel.revise_queued(str(row["id"]), spec))


def period(key: str) -> Op[Period | None]:
    """The key's running ``unique_for`` period, or ``None``."""
    rows = yield Call("uniqueness_period", {"key": key, "now_ms": NOW})
    if not rows:
        return None
    row = rows[0]
    return Period(key, str(row["task_id"]), int(row["started_ms"]), int(row["until_ms"]))


def throttle_held(key: str) -> Op[int]:
    """How many tasks the throttle key holds in their period now."""
    rows = yield Call("uniqueness_throttle_count", {"key": key, "now_ms": NOW})
    return int(rows[0]["held"])
