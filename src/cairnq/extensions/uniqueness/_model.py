"""The submit options of uniqueness over time, debounce and throttle, checked into one
``Policy``; and the errors a submit under them raises."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

from ..._checks import check_int
from ...durations import Duration, duration_ms
from ...errors import AlreadyExists, CairnQError, InvalidArgument
from ...kernel import NewTask

# The longest period an option takes: a year, in milliseconds.
MAX_PERIOD_MS = 366 * 24 * 3600 * 1000


class NotUnique(AlreadyExists):
    """A ``submit(unique_for=...)`` within its key's period that cannot hand back the
    period's task: under ``conflict="reject"``, or because that task was purged.
    Nothing was written.

    Attributes:
        key: The key.
        task_id: The task the period belongs to (perhaps purged).
        until_ms: When the period ends (epoch milliseconds, the clock the submit used).
        purged: Whether that task no longer exists.
    """

    def __init__(self, key: str, task_id: str, until_ms: int, *, purged: bool) -> None:
        super().__init__(key)
        self.args = (
            f"key {key!r} already has task {task_id} in its unique_for period, until "
            f"{until_ms} ms" + (" (that task was purged)" if purged else ""),
        )
        self.task_id = task_id
        self.until_ms = until_ms
        self.purged = purged


class Throttled(CairnQError):
    """A ``submit(throttle=...)`` found its throttle key full: ``limit`` tasks were
    enqueued under it within the period. Nothing was written.

    Attributes:
        key: The throttle key.
        limit: How many tasks a period allows.
        per_ms: The period, in milliseconds.
        retry_after_ms: How long until the oldest of them leaves the period.
    """

    def __init__(self, key: str, limit: int, per_ms: int, retry_after_ms: int) -> None:
        super().__init__(
            f"throttle key {key!r} is full: {limit} tasks per {per_ms} ms; "
            f"room again in {retry_after_ms} ms"
        )
        self.key = key
        self.limit = limit
        self.per_ms = per_ms
        self.retry_after_ms = retry_after_ms


@dataclass(frozen=True)
class Throttle:
    """At most ``limit`` tasks enqueued per ``per`` under one throttle key.

    Args:
        limit: Tasks a period allows, at least 1.
        per: The period, a duration (``"1m"``, a ``timedelta``, seconds as a number).
        key: The throttle key; ``None``: the submit's ``key``.

    A submit over the count raises ``Throttled`` and writes nothing. The period
    slides: a task counts for ``per`` from the moment it was enqueued.

    Example::

        await cq.submit("sms.send", payload, throttle=Throttle(10, "1m", key=f"user:{uid}"))
    """

    limit: int
    per: Duration
    key: str | None = None


@dataclass(frozen=True)
class Period:
    """A key's running ``unique_for`` period (``cq.uniqueness.period``).

    Attributes:
        key: The key.
        task_id: The period's task (perhaps purged since).
        started_ms: When it started (epoch milliseconds).
        until_ms: When it ends; a ``unique_for`` submit of the key from then on
            starts a new one.
    """

    key: str
    task_id: str
    started_ms: int
    until_ms: int


@dataclass(frozen=True)
class Policy:
    """A submit's checked options: each period in milliseconds, ``None`` when not given."""

    unique_for_ms: int | None = None
    debounce_ms: int | None = None
    throttle_limit: int | None = None
    throttle_per_ms: int | None = None
    throttle_key: str | None = None


def period_ms(value: Any, what: str) -> int:
    """Milliseconds in a period option: a duration from 1 ms up to a year."""
    return duration_ms(value, what, low_ms=1, high_ms=MAX_PERIOD_MS)


def _throttle(value: Any, key: str | None) -> tuple[int, int, str]:
    if isinstance(value, tuple) and len(value) in (2, 3):
        value = Throttle(*value)
    if not isinstance(value, Throttle):
        raise InvalidArgument(
            f"throttle must be a Throttle(limit, per, key=None) or a (limit, per) tuple; "
            f"got {value!r}"
        )
    limit = check_int(value.limit, "throttle limit", low=1)
    per = period_ms(value.per, "throttle period")
    own = value.key if value.key is not None else key
    if own is None:
        raise InvalidArgument("throttle needs a key: Throttle(..., key=...) or submit(key=...)")
    if not isinstance(own, str) or not own:
        raise InvalidArgument(f"throttle key must be a non-empty string, got {own!r}")
    return limit, per, own


def policy_of(
    spec: NewTask, unique_for: Any, debounce: Any, throttle: Any, given_start: bool
) -> Policy | None:
    """The ``Policy`` of a submit of ``spec`` (``None`` when none of the three is given).

    ``given_start``: whether the submit gave ``delay``, ``run_at`` or ``delay_ms``.

    Raises:
        InvalidArgument: a bad value, ``unique_for`` or ``debounce`` without a key,
            ``unique_for`` with ``conflict="replace"``, ``debounce`` with another of
            the three or with a start time.
    """
    if unique_for is None and debounce is None and throttle is None:
        return None
    unique_ms = None if unique_for is None else period_ms(unique_for, "unique_for")
    debounce_ms = None if debounce is None else period_ms(debounce, "debounce")
    limit = per = None
    throttle_key = None
    if throttle is not None:
        limit, per, throttle_key = _throttle(throttle, spec.key)
    if unique_ms is not None:
        if spec.key is None:
            raise InvalidArgument("unique_for needs a key: submit(..., key=..., unique_for=...)")
        if spec.conflict == "replace":
            raise InvalidArgument(
                "unique_for keeps the period's task, so it takes no conflict='replace'"
            )
    if debounce_ms is not None:
        if spec.key is None:
            raise InvalidArgument("debounce needs a key: submit(..., key=..., debounce=...)")
        if unique_ms is not None or limit is not None:
            raise InvalidArgument("debounce goes alone: not with unique_for or throttle")
        if given_start:
            raise InvalidArgument(
                "debounce decides when the task is due; give no delay, run_at or delay_ms"
            )
    return Policy(unique_ms, debounce_ms, limit, per, throttle_key)


def debounced(spec: NewTask, policy: Policy) -> NewTask:
    """``spec`` due ``policy.debounce_ms`` from now, when the policy debounces."""
    if policy.debounce_ms is None:
        return spec
    return dataclasses.replace(spec, delay_ms=policy.debounce_ms)
