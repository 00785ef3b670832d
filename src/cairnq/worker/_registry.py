"""Task handlers by name, and how each one is called (decided once, at registration)."""

from __future__ import annotations

import inspect
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

from ..errors import InvalidArgument
from ..models import TaskDef
from ..protocol.ops import check_int, check_text

Handler = Callable[..., Any]


@dataclass(frozen=True)
class Registration:
    """One registered handler.

    ``batch`` > 1 delivers a list of contexts per call; ``concurrency`` caps how
    many calls of this name run at once in this worker.
    """

    name: str
    fn: Handler
    batch: int
    concurrency: int | None
    is_async: bool
    takes_payload: bool

    @property
    def solo(self) -> bool:
        """Whether this name needs its own claim draw (batched or separately capped)."""
        return self.batch > 1 or self.concurrency is not None


def _is_async(fn: Handler) -> bool:
    if inspect.iscoroutinefunction(fn):
        return True
    call = getattr(fn, "__call__", None)  # noqa: B004 - an object with an async __call__
    return call is not None and inspect.iscoroutinefunction(call)


def _takes_payload(fn: Handler) -> bool:
    """``(ctx, payload)`` if the handler declares two positional parameters or ``*args``."""
    try:
        params = inspect.signature(fn).parameters.values()
    except (TypeError, ValueError):
        return True
    positional = 0
    for param in params:
        if param.kind is param.VAR_POSITIONAL:
            return True
        if param.kind in (param.POSITIONAL_ONLY, param.POSITIONAL_OR_KEYWORD):
            positional += 1
    return positional >= 2


class Registry:
    """The handlers a worker serves, by task name."""

    def __init__(self) -> None:
        self._by_name: dict[str, Registration] = {}

    def add(
        self,
        name: str | TaskDef[Any, Any] | None,
        fn: Handler,
        *,
        batch: int | None = None,
        concurrency: int | None = None,
    ) -> Registration:
        if not callable(fn):
            raise InvalidArgument(f"handler for {name!r} is not callable")
        if isinstance(name, TaskDef):
            name = name.name
        if name is None:
            name = getattr(fn, "__name__", "")
            if not str(name).isidentifier():
                raise InvalidArgument(
                    f"cannot name a task after {fn!r}; pass a name: @worker.task('my.task')"
                )
        checked = check_text(name, "task name") or ""
        if checked in self._by_name:
            raise InvalidArgument(f"a handler for task {checked!r} is already registered")
        registration = Registration(
            name=checked,
            fn=fn,
            batch=1 if batch is None else check_int(batch, "batch", low=1, high=10_000),
            concurrency=None
            if concurrency is None
            else check_int(concurrency, "concurrency", low=1, high=100_000),
            is_async=_is_async(fn),
            takes_payload=_takes_payload(fn),
        )
        self._by_name[checked] = registration
        return registration

    def get(self, name: str) -> Registration | None:
        return self._by_name.get(name)

    def names(self) -> list[str]:
        return sorted(self._by_name)

    def __iter__(self) -> Iterator[Registration]:
        return iter(self._by_name.values())

    def __len__(self) -> int:
        return len(self._by_name)
