"""Checks of what a submit is given that the kernel's checks do not make: the task
named once, ``metadata`` an object, and a handler function standing for the task it
was registered as."""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

from ..errors import InvalidArgument
from ..models import HANDLER_TASKS

log = logging.getLogger("cairnq.client")


def check_metadata(metadata: Any) -> Any:
    """``metadata`` as given, with one warning line per process for each kind of value
    that is not a JSON object.

    The protocol stores any JSON there, and the reference SDKs write scalars too (the
    ``json_scalar_roundtrip`` conformance scenario), so cairnq stores what it is
    given; but hooks and tracing add their keys to an object only, so anything else
    is most likely a mistake, and is said so once on the ``cairnq.client`` logger.
    """
    if metadata is None or isinstance(metadata, Mapping):
        return metadata
    kind = type(metadata).__name__
    if kind not in _WARNED_METADATA:
        _WARNED_METADATA.add(kind)
        shown = repr(metadata)
        shown = shown if len(shown) <= 60 else shown[:57] + "..."
        log.warning(
            "metadata is a %s (%s), not a JSON object: stored as given, but tracing and "
            "hooks add no keys to it; put it under a key, e.g. metadata={'tags': ...}",
            kind,
            shown,
        )
    return metadata


_WARNED_METADATA: set[str] = set()
"""The kinds of non-object metadata already warned about in this process."""


def handler_task(fn: Any) -> str:
    """The task name a handler was registered under in this process (``@worker.task``).

    Raises:
        InvalidArgument: ``fn`` is registered under no name here, or under several.
    """
    names = tuple(getattr(fn, HANDLER_TASKS, ()))
    label = getattr(fn, "__qualname__", None) or type(fn).__qualname__
    if len(names) == 1:
        return str(names[0])
    if names:
        listed = ", ".join(repr(n) for n in names)
        raise InvalidArgument(
            f"the function {label} handles several tasks ({listed}): submit one by its name"
        )
    short = getattr(fn, "__name__", "name")
    raise InvalidArgument(
        f"task name must be a string or a TaskDef, not the function {label}, which no worker "
        f"in this process registered: submit its task by name (cq.submit({short!r}, ...)), "
        f"or import the module whose @worker.task registers it first"
    )


def task_or_name(task: Any, name: Any, where: str) -> Any:
    """The task name given as ``task=`` (cairnq's spelling) or ``name=`` (the reference's).

    Raises:
        InvalidArgument: both spellings given, or neither.
    """
    if name is None:
        if task is None:
            raise InvalidArgument(
                f"task name must be a string, got None: {where}() needs a task name, "
                f"as in {where}('email.send', payload)"
            )
        return task
    if task is not None:
        raise InvalidArgument(
            f"{where}() got the task twice, as task={task!r} and name={name!r}; pass one "
            "(task= and name= are two spellings of the same argument)"
        )
    return name
