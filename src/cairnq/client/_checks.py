"""Checks of what a submit is given that the kernel's checks do not make: the task
named once, ``metadata`` an object, and a handler function standing for the task it
was registered as."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..errors import InvalidArgument
from ..models import HANDLER_TASKS


def check_metadata(metadata: Any) -> Any:
    """``metadata`` when it is ``None`` or a mapping (a JSON object).

    The protocol stores any JSON there and cairnq reads whatever another SDK left;
    cairnq's clients write objects only, so hooks and tracing can add keys to it.

    Raises:
        InvalidArgument: anything else (a list, a string, a number, ...).
    """
    if metadata is None or isinstance(metadata, Mapping):
        return metadata
    shown = repr(metadata)
    shown = shown if len(shown) <= 60 else shown[:57] + "..."
    raise InvalidArgument(
        f"metadata must be a JSON object (a dict), got {type(metadata).__name__} {shown}; "
        f"put it under a key, e.g. metadata={{'tags': ...}}"
    )


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
