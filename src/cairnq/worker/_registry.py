"""Task handlers by name, and how each one is called (decided once, at registration)."""

from __future__ import annotations

import contextlib
import functools
import inspect
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any, NoReturn

from .._checks import check_int, check_text
from ..backoff import Retry, attempts_of, check_definition, check_retry, handler_timeout_ms
from ..durations import Duration
from ..errors import InvalidArgument
from ..models import HANDLER_TASKS, TaskDef
from ._context import SyncTaskContext, TaskContext
from ._isolating import check_isolate

Handler = Callable[..., Any]


@dataclass(frozen=True)
class Registration:
    """One registered handler.

    ``listed`` (any ``batch`` given at registration, 1 included) delivers a
    list of up to ``batch`` contexts per call; otherwise one context. ``concurrency``
    caps how many calls of this name run at once in this worker; ``resource`` names
    a ceiling on calls shared with every other name holding the same resource.
    ``options`` are the extension options it was registered with, checked
    (``Extension.task_options``); its contexts read them before the worker's.
    ``cancel_grace_ms`` is how long a call whose tasks were canceled runs on before
    the worker stops it (``None``: never); ``isolated`` runs a plain ``def`` handler
    in a child process the worker can kill (``_isolating``).
    ``retry``, ``max_attempts`` and ``timeout_ms`` are the handler's policies
    (``docs/policies.md``), ``None`` where the worker's settings apply.
    """

    name: str
    fn: Handler
    batch: int
    concurrency: int | None
    is_async: bool
    takes_payload: bool
    listed: bool = False
    resource: str | None = None
    options: Mapping[str, object] = field(default_factory=dict)
    cancel_grace_ms: int | None = None
    isolated: bool = False
    retry: Retry | None = None
    max_attempts: int | None = None
    timeout_ms: int | None = None

    @property
    def stoppable(self) -> bool:
        """Whether a cancel stops its calls: an ``async def`` or an isolated handler with
        a grace period."""
        return self.cancel_grace_ms is not None and (self.is_async or self.isolated)


def _is_async(fn: Handler) -> bool:
    if inspect.iscoroutinefunction(fn):
        return True
    call = getattr(fn, "__call__", None)  # noqa: B004 - an object with an async __call__
    return call is not None and inspect.iscoroutinefunction(call)


def _label(fn: Handler) -> str:
    """The handler's name for messages: a function's, a partial's function's, or a class's."""
    target = fn.func if isinstance(fn, functools.partial) else fn
    name = getattr(target, "__name__", None) or type(target).__name__
    return "handler" if name == "<lambda>" else str(name)


PAYLOAD_NAMES = frozenset(
    {
        "payload",
        "data",
        "body",
        "params",
        "args",
        "arguments",
        "input",
        "inputs",
        "item",
        "message",
        "msg",
        "json",
        "obj",
        "value",
        "values",
        "kwargs",
        "request",
    }
)
"""Names that say a lone parameter was written for the payload, not the context."""


def _names_payload(param: inspect.Parameter) -> bool:
    """Whether a lone positional parameter was written for the payload, not the context.

    It was when its annotation names a type other than a task context (``dict``,
    ``MyPayload``; ``Any`` and ``object`` say nothing), or, with no such annotation,
    when its name is a payload's (``payload``,
    ``data``, ``body``, ``*_payload``...). Any other lone parameter (``ctx``,
    ``task``, ``job``, ``_``) receives the context, as it always has.
    """
    annotation = param.annotation
    if isinstance(annotation, str):
        annotation = annotation.strip().removeprefix("typing.")
    if annotation not in (param.empty, Any, object, "Any", "object"):
        if isinstance(annotation, str):
            return "Context" not in annotation
        if isinstance(annotation, type):
            return not issubclass(annotation, (TaskContext, SyncTaskContext))
        return True  # a generic alias (dict[str, Any]) or a union: not a context
    name = param.name.lower()
    return name in PAYLOAD_NAMES or name.endswith(("payload", "_data"))


def _refuse(fn: Handler, task: str, problem: str, listed: bool = False) -> NoReturn:
    label = _label(fn)
    if listed:
        raise InvalidArgument(
            f"handler {label!r} for batched task {task!r} {problem}. A batch handler is called "
            f"with one list of task contexts: `async def {label}(contexts)`"
        )
    raise InvalidArgument(
        f"handler {label!r} for task {task!r} {problem}. cairnq calls a handler with the task "
        f"context first, in one of two forms: `async def {label}(ctx, payload)`, or "
        f"`async def {label}(ctx)` reading ctx.payload (plain `def` works the same way)"
    )


def _takes_payload(fn: Handler, task: str, listed: bool) -> bool:
    """Whether ``fn`` is called ``(ctx, payload)`` rather than ``(ctx)`` (or ``(contexts)``).

    Raises:
        InvalidArgument: the signature cannot take the context as its first
            positional argument, or needs arguments cairnq never passes.
    """
    try:
        signature = inspect.signature(fn)
    except (TypeError, ValueError):
        return True  # a builtin or extension callable: called (ctx, payload)
    params = list(signature.parameters.values())
    positional = [p for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    star_args = any(p.kind is p.VAR_POSITIONAL for p in params)
    required = [p for p in positional if p.default is p.empty]
    keyword_only = [p.name for p in params if p.kind is p.KEYWORD_ONLY and p.default is p.empty]
    if keyword_only:
        _refuse(
            fn,
            task,
            f"has keyword-only parameters without defaults ({', '.join(keyword_only)}), "
            "which cairnq never passes",
            listed,
        )
    most = 1 if listed else 2
    if len(required) > most:
        names = ", ".join(p.name for p in required)
        _refuse(
            fn,
            task,
            f"requires {len(required)} positional parameters ({names}); at most {most}",
            listed,
        )
    if not positional and not star_args:
        _refuse(fn, task, "takes no positional parameter, so it cannot take the context", listed)
    if listed:
        return False
    if star_args or len(positional) >= 2:
        return True
    lone = positional[0]
    if _names_payload(lone):
        _refuse(
            fn,
            task,
            f"takes one parameter, {lone.name!r}, which would receive the task context, "
            "not the payload",
        )
    return False


def check_resources(resources: Mapping[str, int] | None) -> dict[str, int]:
    """Resource capacities by name (``{"gpu": 1}``), each an integer >= 1.

    Raises:
        InvalidArgument: not a mapping, a name that is not text, or a capacity below 1.
    """
    if resources is None:
        return {}
    if not isinstance(resources, Mapping):
        raise InvalidArgument(
            f"resources must be a mapping of name to capacity, like {{'gpu': 1}}; "
            f"got {type(resources).__name__}"
        )
    return {
        check_text(name, "resource name") or "": check_int(
            capacity, f"resource {name!r} capacity", low=1, high=100_000
        )
        for name, capacity in resources.items()
    }


class Registry:
    """The handlers a worker serves, by task name, and the resources they share."""

    def __init__(self, resources: Mapping[str, int] | None = None) -> None:
        self._by_name: dict[str, Registration] = {}
        self.resources: dict[str, int] = check_resources(resources)

    def add(
        self,
        name: str | TaskDef[Any, Any] | None,
        fn: Handler,
        *,
        batch: int | None = None,
        concurrency: int | None = None,
        resource: str | None = None,
        options: Mapping[str, object] | None = None,
        cancel_grace_ms: int | None = None,
        isolate: bool = False,
        max_attempts: int | None = None,
        retry: Retry | None = None,
        timeout: Duration | None = None,
    ) -> Registration:
        if not callable(fn):
            raise InvalidArgument(f"handler for {name!r} is not callable")
        retry = check_retry(retry)
        if isinstance(name, TaskDef):
            # The definition's policies, where the registration gives none of its own;
            # the whole definition is checked, even where the registration overrides it.
            defined, _, _ = check_definition(name.retry, name.max_attempts, name.timeout)
            if retry is None:
                retry = defined
            if max_attempts is None and (retry is None or retry.max_attempts is None):
                max_attempts = name.max_attempts
            if timeout is None:
                timeout = name.timeout
            name = name.name
        attempts = attempts_of(max_attempts, retry, "task()")
        timeout_ms = handler_timeout_ms(timeout)
        if name is None:
            name = getattr(fn, "__name__", "")
            if not str(name).isidentifier():
                raise InvalidArgument(
                    f"cannot name a task after {fn!r}; pass a name: @worker.task('my.task')"
                )
        checked = check_text(name, "task name") or ""
        if checked in self._by_name:
            raise InvalidArgument(f"a handler for task {checked!r} is already registered")
        size = 1 if batch is None else check_int(batch, "batch", low=1, high=10_000)
        if resource is not None and resource not in self.resources:
            declared = ", ".join(repr(r) for r in self.resources) or "none"
            raise InvalidArgument(
                f"resource {resource!r} for task {checked!r} is not declared in the "
                f"worker's resources (declared: {declared}); pass "
                f"Worker(..., resources={{{resource!r}: 1}})"
            )
        isolated = check_isolate(
            isolate, fn, checked, is_async=_is_async(fn), listed=batch is not None
        )
        registration = Registration(
            name=checked,
            fn=fn,
            batch=size,
            concurrency=None
            if concurrency is None
            else check_int(concurrency, "concurrency", low=1, high=100_000),
            is_async=_is_async(fn),
            takes_payload=_takes_payload(fn, checked, batch is not None),
            listed=batch is not None,
            resource=resource,
            options=dict(options or {}),
            cancel_grace_ms=cancel_grace_ms,
            isolated=isolated,
            retry=retry,
            max_attempts=attempts,
            timeout_ms=timeout_ms,
        )
        self._by_name[checked] = registration
        _mark(fn, checked)
        return registration

    def get(self, name: str) -> Registration | None:
        return self._by_name.get(name)

    def names(self) -> list[str]:
        return sorted(self._by_name)

    def __iter__(self) -> Iterator[Registration]:
        return iter(self._by_name.values())

    def __len__(self) -> int:
        return len(self._by_name)


def _mark(fn: Any, name: str) -> None:
    """Record on ``fn`` that it handles ``name`` (``HANDLER_TASKS``): ``cq.submit(fn, ...)``
    then submits that task. A callable that takes no attributes is left as it is."""
    names = tuple(getattr(fn, HANDLER_TASKS, ()))
    if name in names:
        return
    with contextlib.suppress(AttributeError, TypeError):
        setattr(fn, HANDLER_TASKS, (*names, name))
