"""Durable steps: a handler's step runs once per task, its result recorded and given back
to every later attempt (``ctx.step``, ``ctx.transaction_step``).

Each result is written fenced on the attempt's lease into ``cairnq_task_steps``
(migration ``x0009_steps.sql``, which creates the attempt history's table too, and
``x0014_steps_forget.sql``, which makes both tables' rows go with their task through
a trigger).

Everything of the feature is in this folder: the operations (``_ops``), what the
handler's context runs for a step (``_context_async``, its blocking twin generated), its
statements
(``sql/<dialect>/steps_*.sql``) and its migrations (``migrations/<dialect>/``). The
context's methods and the client's ``cq.steps.list`` call them; ``cairnq.history``
re-exports ``StepRecord``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import ClassVar

from .._base import Extension, Option, TaskRows
from ._ops import StepRecord, check_version

__all__ = ["StepRecord", "Steps"]


class Steps(Extension):
    """Runs inside the handler's context; no hook, no worker part.

    Its option ``version`` is the version of the handlers' code that their steps are
    recorded by: per handler, ``@worker.task(version=...)``; for every handler of a
    worker, ``Worker(cq, extensions=[Steps(version=...)])`` (none by default). A retry
    onto another version fails instead of replaying (``StepsChanged``).
    """

    name = "steps"
    # x0009 and x0014 create and forget the attempts' table too; history needs x0009.
    migrations = ("x0009_steps.sql", "x0014_steps_forget.sql")
    optional = ("x0014_steps_forget.sql",)
    tables: ClassVar[Mapping[str, TaskRows]] = {"cairnq_task_steps": "trigger"}
    words = (
        "step_record",
        "recorded_step",
        "task_steps",
        "transaction_step",
        "steps_list",
        "steps_record",
        "extensions.steps",
    )
    pages = "cairnq.extensions.steps._surfaces.pages"
    options: ClassVar[Mapping[str, Option]] = {"version": Option(None, check_version)}
    task_options: ClassVar[Mapping[str, Option]] = {"version": Option(None, check_version)}

    def __init__(self, *, version: str | int | None = None) -> None:
        super().__init__(version=version)
