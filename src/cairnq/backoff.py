"""Retry delays: exponential windows with equal jitter (the worker's default), and
``Retry``, a retry policy of a task name or of one submit."""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Literal

from ._checks import MAX_INT4, check_int
from .durations import Duration, duration_ms
from .errors import InvalidArgument

DEFAULT_BASE_MS = 1000
DEFAULT_MAX_MS = 30_000
# The longest delay a retry policy may set (a day): a longer wait is a schedule.
MAX_RETRY_DELAY_MS = 86_400_000

BACKOFFS = ("exponential", "linear", "constant")
JITTERS = ("equal", "full", "none")

BackoffFunction = Callable[[int, Any], Duration]
"""``backoff(attempt, error)``: the delay before the next run after attempt ``attempt``
failed with ``error`` (the exception the handler raised, or what it gave ``ctx.fail``)."""

Backoff = Literal["exponential", "linear", "constant"] | BackoffFunction


def retry_delay_ms(
    attempt: int,
    *,
    base_ms: int = DEFAULT_BASE_MS,
    max_ms: int = DEFAULT_MAX_MS,
    rand: Callable[[], float] = random.random,
) -> int:
    """How long to wait before running a task again after attempt ``attempt`` failed.

    The window doubles per attempt from ``base_ms`` up to ``max_ms``; the delay
    is uniform in ``[window/2, window)`` (equal jitter), so retries of many
    tasks that failed together spread out without ever retrying at once.
    ``base_ms <= 0`` disables the delay.

    Example:
        ``retry_delay_ms(1)`` is 500-999 ms; ``retry_delay_ms(10)`` is 15-30 s.
    """
    if base_ms <= 0:
        return 0
    window: int = min(max_ms, base_ms * 2 ** max(0, attempt - 1))
    half = window // 2
    return half + int(rand() * (window - half))


def _optional_ms(value: Any, what: str) -> int | None:
    if value is None:
        return None
    return duration_ms(value, what, low_ms=0, high_ms=MAX_RETRY_DELAY_MS)


@dataclass(frozen=True)
class Retry:
    """How a task is retried: on ``@worker.task(retry=...)``, ``TaskDef(retry=...)``
    or ``submit(retry=...)``. Every field left ``None`` keeps the worker's setting.

    Args:
        max_attempts: Runs allowed, counting crashed ones (1 and up). Written into
            the task's row at submit when the submitting client knows it; see
            ``docs/policies.md`` for how a handler's value takes effect.
        backoff: ``"exponential"`` (the window doubles per attempt, the default),
            ``"linear"`` (``base`` times the attempt), ``"constant"`` (``base``
            every time), or a function ``backoff(attempt, error)`` returning a
            duration (not on ``submit``: a function cannot be stored with a task).
        base: The first window, a duration (the worker's ``retry_backoff_ms``).
        max_delay: No window is longer, a duration (the worker's ``retry_backoff_max_ms``).
        jitter: ``"equal"`` (a delay in ``[window/2, window)``, the default for the
            named backoffs), ``"full"`` (in ``[0, window)``) or ``"none"`` (the
            window itself, the default for a function); ``True`` is ``"equal"``,
            ``False`` is ``"none"``.
        no_retry: Exception classes never retried: a handler raising one (or a
            subclass) fails the task at once, whatever attempts are left.

    Raises:
        InvalidArgument: a value of the wrong type or out of bounds.

    Example::

        @worker.task(retry=Retry(max_attempts=8, backoff="linear", base="10s",
                                 max_delay="5m", no_retry=(KeyError,)))
        async def sync_account(ctx, payload): ...
    """

    max_attempts: int | None = None
    backoff: Backoff = "exponential"
    base: Duration | None = None
    max_delay: Duration | None = None
    jitter: str | bool | None = None
    no_retry: tuple[type[BaseException], ...] = ()
    base_ms: int | None = field(init=False, repr=False, compare=False, default=None)
    max_delay_ms: int | None = field(init=False, repr=False, compare=False, default=None)

    def __post_init__(self) -> None:
        if self.max_attempts is not None:
            check_int(self.max_attempts, "max_attempts", low=1, high=MAX_INT4)
        if not callable(self.backoff) and self.backoff not in BACKOFFS:
            raise InvalidArgument(
                f"backoff must be one of {', '.join(BACKOFFS)} or a function "
                f"backoff(attempt, error) returning a duration; got {self.backoff!r}"
            )
        object.__setattr__(self, "base_ms", _optional_ms(self.base, "base"))
        object.__setattr__(self, "max_delay_ms", _optional_ms(self.max_delay, "max_delay"))
        jitter = self.jitter
        if jitter is True:
            jitter = "equal"
        elif jitter is False:
            jitter = "none"
        if jitter is not None and jitter not in JITTERS:
            raise InvalidArgument(
                f"jitter must be one of {', '.join(JITTERS)}, True or False; got {self.jitter!r}"
            )
        object.__setattr__(self, "jitter", jitter)
        no_retry = self.no_retry
        if isinstance(no_retry, type):
            no_retry = (no_retry,)
        if not isinstance(no_retry, (tuple, list, set, frozenset)) or not all(
            isinstance(kind, type) and issubclass(kind, BaseException) for kind in no_retry
        ):
            raise InvalidArgument(
                f"no_retry must be exception classes, like (KeyError, ValueError); got {no_retry!r}"
            )
        object.__setattr__(self, "no_retry", tuple(no_retry))

    @property
    def storable(self) -> bool:
        """Whether the policy can be stored with a task (its backoff is not a function)."""
        return not callable(self.backoff)

    def retries(self, error: object) -> bool:
        """Whether ``error`` may be retried under this policy (it is none of ``no_retry``)."""
        return not (self.no_retry and isinstance(error, self.no_retry))

    def delay_ms(
        self,
        attempt: int,
        error: object,
        *,
        base_ms: int = DEFAULT_BASE_MS,
        max_ms: int = DEFAULT_MAX_MS,
        rand: Callable[[], float] = random.random,
    ) -> int:
        """The delay before the next run after attempt ``attempt`` failed with ``error``.

        ``base_ms`` and ``max_ms`` are the worker's, used where the policy leaves
        ``base`` or ``max_delay`` unset (a backoff function's delay is capped by
        ``max_delay`` alone). A ``base`` of 0 means no delay.

        Raises:
            InvalidArgument: a backoff function returned something that is not a duration.
        """
        base = base_ms if self.base_ms is None else self.base_ms
        cap = max_ms if self.max_delay_ms is None else self.max_delay_ms
        backoff = self.backoff
        if callable(backoff):
            window = duration_ms(
                backoff(attempt, error), "the backoff function's delay", high_ms=MAX_RETRY_DELAY_MS
            )
            # A function's delay is capped by the policy's own max_delay only.
            cap = MAX_RETRY_DELAY_MS if self.max_delay_ms is None else self.max_delay_ms
            jitter = self.jitter or "none"
        else:
            if base <= 0:
                return 0
            steps = max(1, attempt)
            if backoff == "exponential":
                window = base * 2 ** min(steps - 1, 62)
            elif backoff == "linear":
                window = base * steps
            else:
                window = base
            jitter = self.jitter or "equal"
        window = min(window, cap)
        if jitter == "none":
            return window
        if jitter == "full":
            return int(rand() * window)
        half = window // 2
        return half + int(rand() * (window - half))


def check_retry(value: object, what: str = "retry") -> Retry | None:
    """``value`` as a retry policy: ``None`` or a ``Retry``.

    Raises:
        InvalidArgument: anything else.
    """
    if value is None or isinstance(value, Retry):
        return value
    raise InvalidArgument(
        f"{what} must be a cairnq.Retry, like Retry(max_attempts=5, backoff='linear'); "
        f"got {value!r}"
    )


# The longest run timeout a handler (or a ``TaskDef``) may give.
MAX_HANDLER_TIMEOUT_MS = 2**40


def handler_timeout_ms(value: object, what: str = "timeout") -> int | None:
    """A handler's run ``timeout`` in milliseconds (``None``: none given).

    Raises:
        InvalidArgument: not a positive duration.
    """
    if value is None:
        return None
    return duration_ms(value, what, low_ms=1, high_ms=MAX_HANDLER_TIMEOUT_MS)


def check_definition(
    retry: object, max_attempts: object, timeout: object
) -> tuple[Retry | None, int | None, int | None]:
    """A ``TaskDef``'s ``retry``, ``max_attempts`` and ``timeout``, each checked and
    checked together, at its registration and at every submit of it (one that gives
    its own values still refuses a bad definition): the retry policy, the
    ``max_attempts`` they say together and the timeout in milliseconds.

    Raises:
        InvalidArgument: a bad value, or ``max_attempts`` and the retry policy's differing.
    """
    policy = check_retry(retry, "TaskDef retry")
    if max_attempts is not None:
        check_int(max_attempts, "TaskDef max_attempts", low=1, high=MAX_INT4)
    attempts = attempts_of(max_attempts, policy, "TaskDef")
    return policy, attempts, handler_timeout_ms(timeout, "TaskDef timeout")


def attempts_of(max_attempts: object, retry: Retry | None, what: str) -> int | None:
    """The ``max_attempts`` a ``max_attempts=`` keyword and a retry policy say together.

    Raises:
        InvalidArgument: a bad ``max_attempts``, or both saying different numbers.
    """
    given = None if max_attempts is None else check_int(max_attempts, "max_attempts", low=1)
    policy = None if retry is None else retry.max_attempts
    if given is not None and policy is not None and given != policy:
        raise InvalidArgument(
            f"{what} got max_attempts={given} and retry=Retry(max_attempts={policy}); give it once"
        )
    return given if given is not None else policy
