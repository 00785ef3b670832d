"""The built-in extensions, in order, and what a worker's run compiles from a list of
them: their components, and their kernel hooks as one ``Points``."""

from __future__ import annotations

from collections.abc import Sequence

from ..errors import InvalidArgument
from ..kernel.points import Points
from ._base import Component, Extension, WorkerView
from ._builtins import History, Limits, Pauses, Schedules, Snooze, Steps, Workflows
from .presence import Presence


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


def points(extensions: Sequence[Extension], worker: WorkerView) -> Points:
    """The kernel hooks of ``extensions`` in one run of ``worker``, compiled in their order.

    Each hook keeps its extension's ``in_use`` gate; an extension with no hook adds
    nothing, so a worker whose extensions plug nothing in claims and settles as the
    kernel alone.
    """
    claim_filters, draw_claimers, attempt_end, task_end = [], [], [], []
    for extension in extensions:
        hooks = extension.hooks(worker)
        in_use = hooks.in_use
        if hooks.claim_filter is not None:
            claim_filters.append((hooks.claim_filter, in_use))
        if hooks.draw_claimer is not None:
            draw_claimers.append((hooks.draw_claimer, in_use))
        if hooks.attempt_end is not None:
            attempt_end.append((hooks.attempt_end, hooks.before_recover, in_use))
        elif hooks.before_recover is not None:
            raise InvalidArgument(
                f"extension {extension.name}: before_recover without attempt_end reaches nothing"
            )
        if hooks.task_end is not None:
            task_end.append((hooks.task_end, in_use))
    return Points(
        claim_filters=tuple(claim_filters),
        draw_claimers=tuple(draw_claimers),
        attempt_end=tuple(attempt_end),
        task_end=tuple(task_end),
    )
