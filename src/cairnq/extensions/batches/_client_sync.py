# generated from src/cairnq/extensions/batches/_client_async.py by scripts/generate_sync.py; do not edit
# ruff: noqa: E501
"""The client's batches, blocking: ``SyncCairnQ`` inherits its mixin."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any

from ... import kernel
from ..._checks import check_text
from ..._ids import ulid
from ...errors import InvalidArgument
from ...models import Task, TaskDef
from ...protocol.steps import Op
from .._client_sync import ClientView
from .._submit_path import also
from ..search._client_sync import submit_terms

if TYPE_CHECKING:
    from ._ops import Batch, Member

    MemberList = list[Member]

TaskList = list[Task]
# The fields of a callback given as a dict: ``submit``'s, but a key (its batch is its key).
_CALLBACK_FIELDS = frozenset(
    {
        "task", "payload", "queue", "max_attempts", "priority", "metadata", "delay",
        "delay_ms", "run_at", "parent_id", "root_id", "correlation_id", "lineage",
    }
)  # fmt: skip


def _check_flag(value: Any, what: str) -> bool:
    if not isinstance(value, bool):
        raise InvalidArgument(f"{what} must be True or False, got {value!r}")
    return value


def _items(value: Any, what: str) -> list[Any]:
    if isinstance(value, (str, bytes, Mapping)) or not isinstance(value, Iterable):
        raise InvalidArgument(
            f"{what} must be a list of tasks to submit ((task, payload) pairs or dicts "
            f"of submit arguments), got {type(value).__name__}"
        )
    return list(value)


def _callback(client: ClientView, kind: str, value: Any, batch_id: str) -> kernel.NewTask | None:
    """A callback (``on_success``, ...) as the submission its batch stores: a task name,
    a ``TaskDef`` or a dict of ``submit`` arguments without a key; its payload (a dict,
    or none) gets the batch's id as ``batch_id``."""
    if value is None:
        return None
    if isinstance(value, (str, TaskDef)):
        value = {"task": value}
    if not isinstance(value, dict):
        raise InvalidArgument(
            f"{kind} must be a task name, a TaskDef or a dict of submit arguments, "
            f"got {type(value).__name__}"
        )
    if "task" not in value:
        raise InvalidArgument(f"{kind} needs a 'task' (the task name)")
    unknown = sorted(set(value) - _CALLBACK_FIELDS)
    if unknown:
        raise InvalidArgument(
            f"{kind} takes no {', '.join(unknown)} (a callback is submitted once per batch, "
            "without a key)"
        )
    payload = value.get("payload")
    if payload is None:
        payload = {}
    if not isinstance(payload, dict):
        raise InvalidArgument(
            f"{kind}'s payload must be a dict (cairnq adds the batch's id to it as "
            f"batch_id), got {type(payload).__name__}"
        )
    if "batch_id" in payload:
        raise InvalidArgument(f"{kind}'s payload must not hold batch_id: cairnq sets it")
    return client._item({**value, "payload": {**payload, "batch_id": batch_id}})


def _callbacks(
    client: ClientView, given: Mapping[str, Any], batch_id: str
) -> dict[str, kernel.NewTask]:
    from . import _ops

    out: dict[str, kernel.NewTask] = {}
    for kind in _ops.CALLBACKS:
        spec = _callback(client, kind, given[kind], batch_id)
        if spec is not None:
            out[kind] = spec
    return out


class SyncBatches:
    """``cq.batches``: groups of tasks with callbacks submitted exactly once when they end."""

    __slots__ = ("_client",)

    def __init__(self, client: ClientView) -> None:
        self._client = client

    def submit(
        self,
        tasks: Iterable[Any] = (),
        *,
        on_success: Any = None,
        on_failure: Any = None,
        on_complete: Any = None,
        close: bool = True,
        conn: Any = None,
        tags: Iterable[str] | None = None,
    ) -> Batch:
        """Submit a batch: its members and its callbacks, in one transaction.

        Each callback is submitted exactly once, once the batch is closed and every
        member ended: ``on_complete`` always, ``on_success`` when every member
        succeeded, ``on_failure`` when one did not (failed, canceled, or deleted
        before it ended). Its payload is the one given (a dict) with the batch's id
        as ``batch_id``; its handler reads the members' outcomes with
        ``cq.batches.members(payload["batch_id"])``.

        Args:
            tasks: The members: ``(task, payload)`` pairs or dicts of ``submit``
                arguments, as ``submit_many`` takes them.
            on_success, on_failure, on_complete: A callback each (or ``None``): a
                task name, a ``TaskDef``, or a dict of ``submit`` arguments
                (``{"task": ..., "payload": {...}, "queue": ...}``) without ``key``.
            close: ``True`` (the default): no member can be added later. ``False``
                leaves it open for ``add``; its callbacks wait for ``close``.
            conn: PostgreSQL only: the application's connection (see ``submit``).
            tags: Tags of every member (``submit(tags=...)``, ``docs/search.md``);
                the callbacks get none.

        Returns:
            The batch's ``Batch`` (its ``tasks`` the stored members, in order).

        Raises:
            InvalidArgument: a bad member, callback, ``close`` or ``tags``; nothing is
                written.
            SerializationError: a payload or metadata is not portable JSON.
            AlreadyExists: a member's key is taken under ``conflict="reject"``.
            SchemaIncomplete: the database lacks the batch tables (``cairnq migrate``).

        Example::

            batch = cq.batches.submit(
                [("img.resize", {"n": n}) for n in range(1000)],
                on_complete={"task": "img.report", "payload": {"album": 7}},
            )
        """
        from . import _ops
        from ._component import BATCHING

        items = _items(tasks, "tasks")
        flag = _check_flag(close, "close")
        terms = submit_terms(self._client, tags)
        batch_id = "batch_" + ulid()
        given = {"on_success": on_success, "on_failure": on_failure, "on_complete": on_complete}
        callbacks = _callbacks(self._client, given, batch_id)
        specs = [self._client._item(item) for item in items]

        made: list[Batch] = []

        def build(hooked: list[kernel.NewTask]) -> Op[TaskList]:
            return _members_of(_ops.submit(batch_id, hooked, callbacks, close=flag), made)

        BATCHING.add(self._client)
        with also(terms):
            self._client._submit_specs(specs, build, conn)
        return made[-1]

    def add(
        self,
        batch_id: str,
        tasks: Iterable[Any],
        *,
        conn: Any = None,
        tags: Iterable[str] | None = None,
    ) -> TaskList:
        """Add members to an open batch, in one transaction.

        Args:
            batch_id: The batch (``Batch.id``).
            tasks: The members, as ``submit`` takes them.
            conn: PostgreSQL only: the application's connection (see ``submit``).
            tags: Tags of every member added (``docs/search.md``).

        Returns:
            The stored members, in order.

        Raises:
            InvalidArgument: a bad batch id or member; nothing is written.
            BatchNotFound: no batch has this id; nothing is written.
            BatchClosed: the batch is closed (or done); nothing is written.
            SchemaIncomplete: the database lacks the batch tables.

        Example::

            batch = cq.batches.submit([], on_complete="report", close=False)
            cq.batches.add(batch.id, [("page.fetch", {"url": u}) for u in urls])
            cq.batches.close(batch.id)
        """
        from . import _ops
        from ._component import BATCHING

        bid = _ops.check_batch_id(batch_id)
        specs = [self._client._item(item) for item in _items(tasks, "tasks")]
        terms = submit_terms(self._client, tags)
        BATCHING.add(self._client)
        with also(terms):
            return self._client._submit_specs(specs, lambda s: _ops.add(bid, s), conn)

    def close(self, batch_id: str) -> Batch:
        """Close a batch: no member can be added from then on; its callbacks are submitted
        once every member ended (in this transaction, if they all did). Closing a batch
        that is not open changes nothing.

        Raises:
            InvalidArgument: a bad batch id.
            BatchNotFound: no batch has this id.
            SchemaIncomplete: the database lacks the batch tables.
        """
        from . import _ops
        from ._component import BATCHING

        bid = _ops.check_batch_id(batch_id)
        BATCHING.add(self._client)
        return self._client._run(_ops.close(bid), write=True)

    def status(self, batch_id: str) -> Batch | None:
        """A batch's state, member counts by outcome, progress and callbacks (``None`` for
        an id no batch has).

        Raises:
            InvalidArgument: a bad batch id.
            SchemaIncomplete: the database lacks the batch tables.

        Example::

            batch = cq.batches.status(batch_id)
            print(f"{batch.ended}/{batch.total} ended, {batch.failed} failed")
        """
        from . import _ops

        return self._client._run(_ops.status(batch_id), write=False)

    def members(self, batch_id: str, *, after: str | None = None, limit: int = 1000) -> MemberList:
        """A page of a batch's members in task id order, each with the outcome recorded
        when it ended (which a purge of its task does not change).

        Args:
            batch_id: The batch.
            after: Only members whose task id sorts after this one (the last of the
                previous page).
            limit: At most this many (1 to 10,000).

        Raises:
            InvalidArgument: a bad batch id, ``after`` or ``limit``.
            SchemaIncomplete: the database lacks the batch tables.

        Example::

            failed = [m.task_id for m in cq.batches.members(bid) if m.outcome == "failed"]
        """
        from . import _ops

        return self._client._run(_ops.members(batch_id, after=after, limit=limit), write=False)


def _members_of(op: Op[Batch], made: list[Batch]) -> Op[TaskList]:
    """``op``'s members, the shape ``_submit_specs`` hands its hooks; the ``Batch`` itself
    goes to ``made`` (the last one is the one committed, a retried transaction's)."""
    found = yield from op
    made.append(found)
    return found.tasks


class SyncBatchesClient:
    """The client's ``batches`` namespace, and ``batch`` and ``batch_status`` beside ``submit``."""

    @property
    def batches(self: ClientView) -> SyncBatches:
        """Groups of tasks with callbacks: ``submit``, ``add``, ``close``, ``status``,
        ``members``."""
        return SyncBatches(self)

    def batch(
        self: ClientView,
        tasks: Iterable[Any] = (),
        *,
        on_success: Any = None,
        on_failure: Any = None,
        on_complete: Any = None,
        close: bool = True,
        conn: Any = None,
        tags: Iterable[str] | None = None,
    ) -> Batch:
        """Submit a batch of tasks with callbacks: ``cq.batches.submit``, which see.

        Example::

            batch = cq.batch([("email.send", {"to": a}) for a in people],
                                   on_complete="email.report")
        """
        return SyncBatches(self).submit(
            tasks,
            on_success=on_success,
            on_failure=on_failure,
            on_complete=on_complete,
            close=close,
            conn=conn,
            tags=tags,
        )

    def batch_status(self: ClientView, batch_id: str) -> Batch | None:
        """A batch's state, counts and callbacks: ``cq.batches.status``, which see."""
        return SyncBatches(self).status(check_text(batch_id, "batch id") or "")
