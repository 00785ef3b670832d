"""The client's submit under uniqueness over time, debounce or throttle, async.

``scripts/generate_sync.py`` turns this file into ``_client_sync.py`` beside it.
"""

from __future__ import annotations

from typing import Any

from ... import kernel
from ...errors import InvalidArgument
from ...models import Task, TaskDef
from ...protocol.steps import Op
from .._client_async import ClientView
from . import _ops
from ._model import Policy

# The keywords of ``submit`` this extension takes, which a ``TaskDef``'s options may give.
KEYWORDS = ("unique_for", "debounce", "throttle")


def policy_options(
    task: Any, name: Any, unique_for: Any, debounce: Any, throttle: Any
) -> tuple[Any, Any, Any]:
    """``unique_for``, ``debounce`` and ``throttle`` as given, each one not given taken
    from the options of the ``TaskDef`` submitted (``task`` or ``name``), if any.

    Raises:
        InvalidArgument: the ``TaskDef``'s options hold a keyword ``submit`` does not
            take from there.
    """
    given = (unique_for, debounce, throttle)
    definition = task if isinstance(task, TaskDef) else name
    options = definition.options if isinstance(definition, TaskDef) else None
    if not options:
        return given
    unknown = sorted(set(options) - set(KEYWORDS))
    if unknown:
        raise InvalidArgument(
            f"TaskDef options take {', '.join(KEYWORDS)}; got {', '.join(map(repr, unknown))}"
        )
    unique_for, debounce, throttle = (
        options.get(word) if value is None else value
        for word, value in zip(KEYWORDS, given, strict=True)
    )
    return unique_for, debounce, throttle


class AsyncUniquenessClient:
    """The submit ``CairnQ.submit`` hands a task with a ``Policy``."""

    async def _submit_policed(
        self: ClientView, spec: kernel.NewTask, policy: Policy, conn: Any
    ) -> Task:
        """Store ``spec`` under ``policy`` in one transaction, through the client's submit
        hooks and backpressure gate."""
        points = await self._replaced_end([spec])

        def build(specs: list[kernel.NewTask]) -> Op[list[Task]]:
            return _ops.submit(specs[0], policy, points)

        (stored,) = await self._submit_specs([spec], build, conn)
        return stored
