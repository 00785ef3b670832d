"""Snooze: a handler hands its attempt back and the task is queued again after a delay,
no attempt spent (``ctx.snooze``, ``raise Snooze(...)``), at most ``max_snoozes`` times.

Each snooze is counted in ``cairnq_task_snoozes``, in the transaction that hands the
attempt back (``_ops.snooze``). That table is created by ``x0007_flow.sql``, which
the pauses extension owns and ships, so this extension needs it; it owns
``x0012_snoozes_forget.sql`` (a task's counts go with its row), which it works
without.

The operations (``_ops``), the context's ``snooze`` and the ``Snooze`` signal
(``_context_async``, its blocking twin generated), the statements
(``sql/<dialect>/snooze_*.sql``) and the migration are in this folder, its CLI and
pages in ``_surfaces/``. The client calls the operations; ``cairnq.flow`` re-exports
``Snooze``, ``Snoozes`` and ``DEFAULT_MAX_SNOOZES``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import ClassVar

from .._base import Extension, Option, TaskRows
from .._context import Signal
from ._context_async import Snooze, settle_snooze
from ._ops import DEFAULT_MAX_SNOOZES, Snoozes, check_max_snoozes

__all__ = ["DEFAULT_MAX_SNOOZES", "Snooze", "Snoozes", "Snoozing"]


class Snoozing(Extension):
    """The snooze extension: ``ctx.snooze``, and the ``Snooze`` signal a handler raises.

    How many times a task may snooze is its options: the worker's ``max_snoozes``,
    and a handler's own (``@worker.task(max_snoozes=...)``), which the context reads.

    Args:
        max_snoozes: How many times each task may snooze before the next snooze
            fails it (20), unless its handler sets its own.

    Example::

        worker = Worker(cq, extensions=[Snoozing(max_snoozes=5)])
    """

    name = "snooze"
    migrations = ("x0012_snoozes_forget.sql",)
    optional = ("x0012_snoozes_forget.sql",)
    needs = ("x0007_flow.sql",)
    tables: ClassVar[Mapping[str, TaskRows]] = {"cairnq_task_snoozes": "trigger"}
    words = ("snooze",)
    cli = "cairnq.extensions.snooze._surfaces.cli"
    pages = "cairnq.extensions.snooze._surfaces.pages"
    options: ClassVar[Mapping[str, Option]] = {
        "max_snoozes": Option(DEFAULT_MAX_SNOOZES, check_max_snoozes)
    }
    task_options: ClassVar[Mapping[str, Option]] = {"max_snoozes": Option(None, check_max_snoozes)}

    def __init__(self, *, max_snoozes: int = DEFAULT_MAX_SNOOZES) -> None:
        super().__init__(max_snoozes=max_snoozes)

    def signals(self) -> Mapping[type[BaseException], Signal]:
        return {Snooze: settle_snooze}
