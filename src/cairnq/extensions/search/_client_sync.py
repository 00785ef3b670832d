# generated from src/cairnq/extensions/search/_client_async.py by scripts/generate_sync.py; do not edit
# ruff: noqa: E501
"""The client's search, blocking: ``SyncCairnQ`` inherits its mixin."""

from __future__ import annotations

import datetime
from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Protocol

from ..._clock import Clock
from ..._sealing import refuse_payload_path
from ...durations import Duration
from ...models import Task, TaskDef
from .._base import Extension
from .._client_sync import ClientView
from . import Search

if TYPE_CHECKING:
    from ._model import Field
    from ._ops import TaskTerms, Terms

TaskList = list[Task]


class _Searching(ClientView, Protocol):
    extensions: list[Extension]

    def _clock(self) -> Clock: ...


def declared_fields(extensions: Sequence[Extension]) -> tuple[Field, ...]:
    """The search fields declared by the ``Search`` among a client's ``extensions``."""
    for extension in extensions:
        if isinstance(extension, Search):
            return extension.fields
    return ()


def submit_terms(client: Any, tags: Any, task: Any = None, name: Any = None) -> Terms | None:
    """What a submit records besides its task: its ``tags`` (checked; when not given,
    those of the ``TaskDef`` submitted, ``options={"tags": [...]}``) and the fields
    ``client`` declares; ``None`` when there is neither, so the submit writes nothing more.

    Raises:
        InvalidArgument: bad ``tags``, or a field read from a payload path on a client
            that encrypts payloads (the value would be stored in the clear); nothing is
            written.
    """
    if tags is None:
        definition = task if isinstance(task, TaskDef) else name
        if isinstance(definition, TaskDef) and definition.options:
            tags = definition.options.get("tags")
    checked: tuple[str, ...] = ()
    if tags is not None:
        from ._model import check_tags

        checked = check_tags(tags)
    fields = declared_fields(getattr(client, "extensions", ()))
    codec = getattr(client, "codec", None)
    if fields and codec is not None and codec.sealer is not None:
        for field in fields:
            refuse_payload_path(
                ".".join((field.source, *field.path)), f"search field {field.name!r}"
            )
    if not checked and not fields:
        return None
    from ._ops import Terms

    return Terms(checked, fields, client._readiness("search"))


class SyncSearch:
    """``cq.search``: tasks by tag, declared field, error text and time."""

    __slots__ = ("_client",)

    def __init__(self, client: _Searching) -> None:
        self._client = client

    def find(
        self,
        *,
        tags: str | Iterable[str] | None = None,
        where: Mapping[str, Any] | None = None,
        error: str | None = None,
        since: datetime.datetime | Duration | None = None,
        until: datetime.datetime | Duration | None = None,
        status: str | None = None,
        queue: str | None = None,
        name: str | None = None,
        before: str | None = None,
        limit: int = 100,
    ) -> TaskList:
        """Tasks matching every filter given, newest first (by task id).

        Args:
            tags: A tag, or tags a task must all hold (``submit(tags=...)``).
            where: Declared search fields and the value each must hold
                (``{"customer": "acme"}``); a number or boolean matches the same
                number or boolean the field found.
            error: Text the task's error (its type or message) holds, in any case.
            since, until: Created at or after ``since``, before ``until``: an aware
                ``datetime``, or a duration meaning that long ago (``"1h"``).
            status, queue, name: The task's status, queue and name.
            before: Only tasks whose id sorts before this one: the last id of the
                previous page, to page on.
            limit: At most this many (1 to 1000; 100).

        Returns:
            The tasks, newest first.

        Raises:
            InvalidArgument: a filter of the wrong type or value.
            SchemaIncomplete: ``tags`` or ``where`` on a database without the search
                table (``cairnq migrate``).

        Example::

            failed = cq.search.find(tags=["billing"], where={"customer": "acme"},
                                          status="failed", since="1d")
            page2 = cq.search.find(tags="billing", before=failed[-1].id)
        """
        from ._model import check_query
        from ._ops import find

        query = check_query(
            tags=tags, where=where, error=error, since=since, until=until, status=status,
            queue=queue, name=name, before=before, limit=limit,
            now_ms=self._client._clock().now_ms(),
        )  # fmt: skip
        return self._client._run(find(query), write=False)

    def query(self, text: str, *, before: str | None = None, limit: int = 100) -> TaskList:
        """The tasks a search box's ``text`` finds, newest first: ``find`` with its
        filters written as words (the dashboard's box and ``docs/search.md``):
        ``tag:billing`` (or ``#billing``), ``customer=acme``, ``error:"card declined"``
        (words alone are error text), ``status:failed``, ``queue:``, ``name:``,
        ``since:1d``, ``until:2h``. Quotes keep spaces in a value.

        Raises:
            InvalidArgument: text that does not parse, or a bad filter.
            SchemaIncomplete: a tag or field on a database without the search table.

        Example::

            tasks = cq.search.query('tag:billing customer=acme since:1d')
        """
        from ._model import query_of
        from ._ops import find

        checked = query_of(text, before=before, limit=limit, now_ms=self._client._clock().now_ms())
        return self._client._run(find(checked), write=False)

    def of(self, task_id: str) -> TaskTerms:
        """A task's tags and the declared fields its submit recorded (empty for none).

        Example::

            terms = cq.search.of(task.id)
            print(terms.tags, terms.fields)
        """
        from ._ops import terms_of

        return self._client._run(terms_of(task_id), write=False)


class SyncSearchClient:
    """The client's ``search`` namespace."""

    @property
    def search(self: _Searching) -> SyncSearch:
        """Tasks by tag, declared field, error text and time: ``find``, ``of``."""
        return SyncSearch(self)
