"""Concurrency and rate limits every cairnq worker on the database enforces when it claims.

A limit governs a scope, a queue or a task name, optionally split by a partition
key computed from each task: ``"payload.customer"`` (a path into the payload or
the metadata, computed by any cairnq worker) or a function of the task (computed
only by the workers that declare it). A task over a limit stays queued and due:
it is not claimed, not failed and spends no attempt, and it never holds back
tasks of other keys behind it.

Example::

    from cairnq import Worker
    from cairnq.limits import Limit, Limits

    worker = Worker(store, queues=["emails"], extensions=[Limits([
        Limit.concurrency(2, queue="emails", key="payload.customer"),
        Limit.rate(20, per="1s", burst=5, queue="emails"),
    ])])
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from ...durations import MAX_DURATION_MS, Duration, duration_ms, format_duration
from ...errors import InvalidArgument
from ...models import Task

__all__ = ["Limit", "LimitKeyError", "LimitUsage"]

MAX_LIMIT = 2**31 - 1
MAX_KEY_BYTES = 1000
KEY_ROOTS = ("payload", "metadata")
FUNCTION_PREFIX = "call:"
_PATH_PART = re.compile(r"[A-Za-z0-9_\-]+")

KeyFunction = Callable[[Task], str]
Kind = Literal["concurrency", "rate"]
Scope = Literal["queue", "name"]


class LimitKeyError(InvalidArgument):
    """A task's partition key could not be computed: the path is missing from the task,
    its value is not a non-empty string or an integer (see ``key_text``), or the key
    function raised or returned something else. At claim time the task fails with this
    error (``limit_key`` code) rather than stalling the queue."""


def _amount(value: Any, what: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise InvalidArgument(f"{what} must be an integer, not {type(value).__name__}")
    if value < 1:
        raise InvalidArgument(f"{what} must be >= 1, got {value}")
    if value > MAX_LIMIT:
        raise InvalidArgument(f"{what} must be <= {MAX_LIMIT}, got {value}")
    return value


def _period(per: Any) -> int:
    """A rate limit's period: seconds as a number, a string with a unit or a ``timedelta``."""
    return duration_ms(per, "per", low_ms=1, high_ms=MAX_DURATION_MS)


def _key_path(key: str) -> str:
    parts = key.split(".")
    if (
        len(parts) < 2
        or parts[0] not in KEY_ROOTS
        or not all(_PATH_PART.fullmatch(part) for part in parts[1:])
    ):
        raise InvalidArgument(
            f"key {key!r} must be a path into the payload or the metadata, "
            "such as 'payload.customer' or 'metadata.tenant.id' (letters, digits, _ and -), "
            "or a function of the task"
        )
    return key


def _scope(queue: Any, name: Any) -> tuple[Scope, str]:
    if (queue is None) == (name is None):
        raise InvalidArgument("a limit governs exactly one of queue=... or name=...")
    target = queue if queue is not None else name
    if not isinstance(target, str) or not target:
        raise InvalidArgument("the queue or task name a limit governs must be a non-empty string")
    return ("queue", target) if queue is not None else ("name", target)


def key_text(value: Any, source: str) -> str:
    """A key value as stored: a non-empty string as it is, or an integer as its decimal
    digits, so ``7`` and ``"7"`` are one key while ``"007"``, ``"7.0"`` and ``"1e3"`` are
    keys of their own.

    This is the one key rule: the candidate, page and running-count statements
    (``limits_candidates*.sql``, ``limits_*_keyed.sql``, ``limits_running_by_path.sql``,
    the fair share's under a cap) derive the same text from a task's JSON on either
    backend, and a value refused here matches no key there.

    Raises:
        LimitKeyError: a boolean, a float or any other type, the empty string, a string
            that is not valid Unicode (a lone surrogate), or a key over 1000 bytes.
    """
    if isinstance(value, bool) or not isinstance(value, (str, int)):
        raise LimitKeyError(f"{source} gave {type(value).__name__}, not a string or an integer")
    text = str(value)
    if not text:
        raise LimitKeyError(f"{source} gave an empty string")
    try:
        size = len(text.encode("utf-8"))
    except UnicodeEncodeError:
        raise LimitKeyError(f"{source} gave a string with a lone surrogate") from None
    if size > MAX_KEY_BYTES:
        raise LimitKeyError(f"{source} gave a key over {MAX_KEY_BYTES} bytes")
    return text


@dataclass(frozen=True)
class Limit:
    """One concurrency or rate limit; build it with ``Limit.concurrency`` or ``Limit.rate``.

    Attributes:
        id: The limit's name in the database (derived from the definition unless given).
        kind: ``"concurrency"`` or ``"rate"``.
        amount: Tasks running at once per key (concurrency), or tasks per period (rate).
        scope, target: What it governs: ``("queue", "emails")`` or ``("name", "send")``.
        key: The partition key's path (``"payload.customer"``), ``"call:<function>"``
            for a function key, or ``None``: the whole scope is one key.
        period_ms, burst: A rate limit's period and bucket size.
        source: ``"worker"`` (declared on a worker) or ``"operator"`` (CLI or client).
    """

    id: str
    kind: Kind
    amount: int
    scope: Scope
    target: str
    key: str | None = None
    period_ms: int | None = None
    burst: int | None = None
    source: str = "worker"
    key_function: KeyFunction | None = field(default=None, compare=False, repr=False)

    @classmethod
    def concurrency(
        cls,
        limit: int,
        *,
        queue: str | None = None,
        name: str | None = None,
        key: str | KeyFunction | None = None,
        id: str | None = None,
    ) -> Limit:
        """At most ``limit`` tasks of the scope (per key, with ``key``) running at once.

        Args:
            limit: Tasks running at once, >= 1.
            queue, name: The queue, or the task name, governed (exactly one).
            key: A path such as ``"payload.customer"``, or a function of the ``Task``
                returning a string: each key value gets its own ``limit``. A value is a
                non-empty string or an integer; an integer is the same key as its digits
                as a string (``7`` and ``"7"``), and anything else fails the task with
                ``LimitKeyError`` at claim.
            id: The limit's name in the database.

        Returns:
            The limit.

        Raises:
            InvalidArgument: a limit below 1, no or two scopes, a malformed key path.

        Example::

            Limit.concurrency(2, queue="emails", key="payload.customer")
        """
        return cls._build("concurrency", limit, queue, name, key, id, None, None)

    @classmethod
    def rate(
        cls,
        limit: int,
        *,
        per: Duration = "1s",
        burst: int | None = None,
        queue: str | None = None,
        name: str | None = None,
        key: str | KeyFunction | None = None,
        id: str | None = None,
    ) -> Limit:
        """At most ``limit`` claims per ``per`` (per key), as a token bucket of ``burst``.

        The bucket starts full and refills continuously at ``limit`` per ``per``; a
        claim takes one token. Over ``per`` seconds of steady demand that admits
        ``burst + limit`` tasks, then ``limit`` per period.

        Args:
            limit: Tasks per period, >= 1.
            per: The period, > 0: a string with a unit (``"1s"``, ``"1m"``),
                a ``timedelta``, or seconds as a number (``per=60`` is a minute).
            burst: The bucket's size (default: ``limit``), >= 1.
            queue, name, key, id: As for ``Limit.concurrency``.

        Returns:
            The limit.

        Raises:
            InvalidArgument: a limit or burst below 1, a period of 0, a bad scope or key.

        Example::

            Limit.rate(20, per="1s", burst=5, queue="llm")
        """
        if not isinstance(limit, bool) and isinstance(limit, int) and limit < 1:
            raise InvalidArgument(
                f"a rate limit's limit (tasks per period) must be >= 1, got {limit}: a rate "
                "of 0 admits nothing; to stop claims, pause the queue or the task name"
            )
        _amount(limit, "limit")
        period = _period(per)
        size = _amount(limit if burst is None else burst, "burst")
        return cls._build("rate", limit, queue, name, key, id, period, size)

    @classmethod
    def _build(
        cls,
        kind: Kind,
        limit: Any,
        queue: Any,
        name: Any,
        key: Any,
        id: Any,
        period_ms: int | None,
        burst: int | None,
    ) -> Limit:
        amount = _amount(limit, "limit")
        scope, target = _scope(queue, name)
        function: KeyFunction | None = None
        if key is None:
            path = None
        elif isinstance(key, str):
            path = _key_path(key)
        elif callable(key):
            function = key
            label = getattr(key, "__qualname__", None) or type(key).__qualname__
            path = f"{FUNCTION_PREFIX}{getattr(key, '__module__', '?')}.{label}"
        else:
            raise InvalidArgument(
                f"key must be a path string or a function, not {type(key).__name__}"
            )
        if id is None:
            id = f"{kind}:{scope}={target}" + (f":{path}" if path else "")
        elif not isinstance(id, str) or not id or len(id.encode("utf-8")) > MAX_KEY_BYTES:
            raise InvalidArgument("a limit's id must be a non-empty string of at most 1000 bytes")
        return cls(
            id=id,
            kind=kind,
            amount=amount,
            scope=scope,
            target=target,
            key=path,
            period_ms=period_ms,
            burst=burst,
            key_function=function,
        )

    @property
    def json_path(self) -> str | None:
        """A path key as a JSON path into its root column (``$."customer"``), else ``None``."""
        if self.key is None or self.function_key:
            return None
        return "$" + "".join(f'."{part}"' for part in self.key.split(".")[1:])

    @property
    def key_root(self) -> str | None:
        """A path key's root column (``"payload"`` or ``"metadata"``), else ``None``."""
        if self.key is None or self.function_key:
            return None
        return self.key.split(".")[0]

    @property
    def function_key(self) -> bool:
        """Whether the key is a function (computed only where it is declared)."""
        return self.key is not None and self.key.startswith(FUNCTION_PREFIX)

    @property
    def period_text(self) -> str:
        """A rate limit's period for people (``1s``, ``1m00s``, ``1500ms``); ``-`` otherwise."""
        if self.period_ms is None:
            return "-"
        ms = self.period_ms
        return format_duration(ms) if ms % 1000 == 0 else f"{ms}ms"

    def governs(self, queue: str, name: str) -> bool:
        """Whether a task of ``queue`` and ``name`` counts against this limit."""
        return (queue if self.scope == "queue" else name) == self.target

    def governs_every_task_of(self, queues: Sequence[str], names: Sequence[str] | None) -> bool:
        """Whether every task a draw of ``names`` (``None``: any) in ``queues`` can take
        counts against this limit."""
        if self.scope == "queue":
            return list(queues) == [self.target]
        return names is not None and list(names) == [self.target]

    def key_of(self, task: Task) -> str:
        """The partition key ``task`` counts under (``""`` for a limit without a key).

        Raises:
            LimitKeyError: the key cannot be computed (see ``LimitKeyError``).
        """
        if self.key is None:
            return ""
        if self.key_function is not None:
            try:
                value = self.key_function(task)
            except Exception as exc:
                raise LimitKeyError(
                    f"limit {self.id!r}: the key function raised {type(exc).__name__}: {exc}"
                ) from exc
            return key_text(value, f"limit {self.id!r}: the key function")
        return self.key_in(task.payload, task.metadata)

    def key_in(self, payload: Any, metadata: Any) -> str:
        """The key a path limit reads from a task's decoded payload and metadata.

        Raises:
            LimitKeyError: the path is missing or its value is not a non-empty string or
                an integer.
        """
        if self.key is None:
            return ""
        root, *path = self.key.split(".")
        found: Any = payload if root == "payload" else metadata
        for part in path:
            if not isinstance(found, Mapping) or part not in found:
                raise LimitKeyError(f"limit {self.id!r}: the task has no {self.key}")
            found = found[part]
        return key_text(found, f"limit {self.id!r}: {self.key}")

    def refill(self, tokens: float, elapsed_ms: int) -> float:
        """A rate bucket's tokens after ``elapsed_ms`` (capped at the burst)."""
        assert self.period_ms is not None
        assert self.burst is not None
        return min(float(self.burst), tokens + max(0, elapsed_ms) * self.amount / self.period_ms)

    def wait_ms(self, tokens: float) -> int:
        """Milliseconds until a bucket holding ``tokens`` holds one whole token."""
        assert self.period_ms is not None
        return max(1, math.ceil((1.0 - tokens) * self.period_ms / self.amount))

    def describe(self) -> str:
        """One line for people: ``2 running per payload.customer in queue emails``."""
        where = f"{'queue' if self.scope == 'queue' else 'task'} {self.target}"
        per = f" per {self.key}" if self.key else ""
        if self.kind == "concurrency":
            return f"{self.amount} running at once{per} in {where}"
        return f"{self.amount} per {self.period_ms}ms (burst {self.burst}){per} in {where}"

    def with_amounts(self, row: Mapping[str, Any]) -> Limit:
        """This limit with the numbers (and source) a stored row holds."""
        return Limit(
            id=self.id,
            kind=row["kind"],
            amount=int(row["amount"]),
            scope=row["scope"],
            target=row["target"],
            key=row["key_path"],
            period_ms=None if row["period_ms"] is None else int(row["period_ms"]),
            burst=None if row["burst"] is None else int(row["burst"]),
            source=row["source"],
            key_function=self.key_function if row["key_path"] == self.key else None,
        )

    @classmethod
    def from_row(cls, row: Mapping[str, Any]) -> Limit:
        """A limit as stored in ``cairnq_limits`` (a function key has no function here)."""
        return cls(
            id=row["name"],
            kind=row["kind"],
            amount=int(row["amount"]),
            scope=row["scope"],
            target=row["target"],
            key=row["key_path"],
            period_ms=None if row["period_ms"] is None else int(row["period_ms"]),
            burst=None if row["burst"] is None else int(row["burst"]),
            source=row["source"],
        )


@dataclass(frozen=True)
class LimitUsage:
    """A limit's current use, as ``limit_usage`` reads it.

    Attributes:
        limit: The limit.
        running: Tasks running now per key (keys with none are absent).
        waiting: Due queued tasks in the limit's scope (counted up to 10,000).
        tokens: A rate limit's tokens per key, refilled to now (keys never used are absent).
    """

    limit: Limit
    running: dict[str, int]
    waiting: int
    tokens: dict[str, float]

    def busiest(self, most: int) -> list[tuple[str, int]]:
        """Up to ``most`` keys with the most running tasks, as ``(key, running)``, busiest
        first (ties by key)."""
        return sorted(self.running.items(), key=lambda item: (-item[1], item[0]))[:most]

    def lowest_tokens(self, most: int) -> list[tuple[str, float]]:
        """Up to ``most`` keys of a rate limit with the fewest tokens, emptiest first."""
        return sorted(self.tokens.items(), key=lambda item: (item[1], item[0]))[:most]

    @property
    def saturated(self) -> list[str]:
        """Keys at their concurrency limit now."""
        if self.limit.kind != "concurrency":
            return []
        return sorted(k for k, n in self.running.items() if n >= self.limit.amount)
