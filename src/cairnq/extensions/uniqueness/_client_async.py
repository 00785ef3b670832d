"""The client's submit under uniqueness over time, debounce or throttle, async.

``scripts/generate_sync.py`` turns this file into ``_client_sync.py`` beside it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ... import kernel
from ...errors import InvalidArgument
from ...models import Task, TaskDef
from ...protocol.steps import Op
from .._client_async import ClientView

if TYPE_CHECKING:
    from ._model import Period, Policy

# The keywords of ``submit`` this extension takes, which a ``TaskDef``'s options may give.
KEYWORDS = ("unique_for", "debounce", "throttle")
# The other extensions' keywords a ``TaskDef``'s options may give (read by their owners).
OTHER_KEYWORDS = ("tags",)


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
    taken = (*KEYWORDS, *OTHER_KEYWORDS)
    unknown = sorted(set(options) - set(taken))
    if unknown:
        raise InvalidArgument(
            f"TaskDef options take {', '.join(taken)}; got {', '.join(map(repr, unknown))}"
        )
    unique_for, debounce, throttle = (
        options.get(word) if value is None else value
        for word, value in zip(KEYWORDS, given, strict=True)
    )
    return unique_for, debounce, throttle


class AsyncUniqueness:
    """``cq.uniqueness``: the periods of ``unique_for`` submits and the counts of
    throttle keys, as they stand now."""

    __slots__ = ("_client",)

    def __init__(self, client: ClientView) -> None:
        self._client = client

    async def period(self, key: str) -> Period | None:
        """The key's running ``unique_for`` period: its task and when it ends; ``None``
        when none runs (a ``unique_for`` submit of the key would start one).

        Raises:
            SchemaIncomplete: the database lacks the extension's tables.

        Example::

            period = await cq.uniqueness.period("report:42")
            if period:
                print(period.task_id, period.until_ms)
        """
        from . import _ops

        return await self._client._run(_ops.period(key), write=False)

    async def throttled(self, key: str) -> int:
        """How many tasks the throttle key holds in their period now (a throttled submit
        is refused once this reaches its limit).

        Raises:
            SchemaIncomplete: the database lacks the extension's tables.
        """
        from . import _ops

        return await self._client._run(_ops.throttle_held(key), write=False)


class AsyncUniquenessClient:
    """The client's ``uniqueness`` namespace, and the submit ``CairnQ.submit`` hands a
    task with a ``Policy``."""

    @property
    def uniqueness(self: ClientView) -> AsyncUniqueness:
        """The periods of ``unique_for`` submits and the throttle keys' counts."""
        return AsyncUniqueness(self)

    async def _submit_policed(
        self: ClientView, spec: kernel.NewTask, policy: Policy, conn: Any
    ) -> Task:
        """Store ``spec`` under ``policy`` in one transaction, through the client's submit
        hooks and backpressure gate."""
        from . import _ops

        points = await self._replaced_end([spec])

        def build(specs: list[kernel.NewTask]) -> Op[list[Task]]:
            return _ops.submit(specs[0], policy, points)

        (stored,) = await self._submit_specs([spec], build, conn)
        return stored
