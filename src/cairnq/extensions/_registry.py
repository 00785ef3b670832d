"""The built-in extensions, in order, and what a worker's run compiles from a list of them."""

from __future__ import annotations

from collections.abc import Sequence

from ..errors import InvalidArgument
from ._base import Component, Extension, WorkerView
from ._builtins import History, Limits, Pauses, Snooze, Steps, Workflows
from .presence import Presence
from .schedules import Schedules


def builtins() -> list[Extension]:
    """cairnq's own features, in the order their worker parts are prepared.

    Limits come first: a worker declaring limits on a database without them is
    refused before any other part has written anything (presence its row).
    """
    return [Limits(), Pauses(), Presence(), Workflows(), Schedules(), Snooze(), Steps(), History()]


def check(extensions: Sequence[Extension]) -> list[Extension]:
    """``extensions`` as a list, once each name, each migration and each table owned once.

    Raises:
        InvalidArgument: two extensions share a name, or own the same migration or table.
    """
    names: set[str] = set()
    owners: dict[tuple[str, str], str] = {}
    for extension in extensions:
        if not isinstance(extension, Extension):
            raise InvalidArgument(f"not an Extension: {extension!r}")
        if extension.name in names:
            raise InvalidArgument(f"two extensions are named {extension.name}")
        names.add(extension.name)
        owned = [
            *(("migration", m) for m in extension.migrations),
            *(("table", t) for t in extension.tables),
        ]
        for kind, what in owned:
            owner = owners.setdefault((kind, what), extension.name)
            if owner != extension.name:
                raise InvalidArgument(
                    f"{kind} {what} is {owner}'s; extension {extension.name} declares it too"
                )
    return list(extensions)


def components(extensions: Sequence[Extension], worker: WorkerView) -> list[Component]:
    """The worker parts of ``extensions`` for one run of ``worker``, in their order."""
    return [part for extension in extensions for part in extension.components(worker)]
