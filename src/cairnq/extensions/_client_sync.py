# generated from src/cairnq/extensions/_client_async.py by scripts/generate_sync.py; do not edit
"""What an extension's client code needs from the blocking client: ``ClientView``."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol, TypeVar

from .. import kernel
from .._json import JsonCodec
from .._readiness import Readiness
from .._wakeups import Subscription
from ..kernel.procedures import Procedure
from ..models import Task
from ..protocol.steps import Op
from ._base import Extension
from ._namespace import namespace_of

T = TypeVar("T")
N = TypeVar("N", covariant=True)


class ClientView(Protocol):
    """The client as its extensions' client parts use it."""

    codec: JsonCodec

    def _run(self, op: Op[T], *, write: bool) -> T: ...

    def _follow(self, procedure: Procedure[T], sub: Subscription | None = None) -> T: ...

    def get(self, task_id: str) -> Task | None:
        """The task with this id, or ``None``."""
        ...

    def _where(self) -> str: ...

    def _readiness(self, name: str) -> Readiness: ...

    def _spec(
        self, task: Any, payload: Any, name: Any, options: dict[str, Any]
    ) -> kernel.NewTask: ...

    def _plain_spec(self, task: str, payload: Any) -> kernel.NewTask: ...

    def _item(self, item: Any, task_id: str | None = None) -> kernel.NewTask: ...

    def _submit_one(self, spec: kernel.NewTask, conn: Any) -> Task: ...

    def _replaced_end(self, specs: list[kernel.NewTask]) -> kernel.Points: ...

    def _submit_specs(
        self,
        specs: list[kernel.NewTask],
        build: Callable[[list[kernel.NewTask]], Op[list[Task]]],
        conn: Any,
    ) -> list[Task]: ...


class Namespaced(Protocol[N]):
    """An extension class with a namespace for this client."""

    @property
    def sync_namespace(self) -> Callable[[Any], N]: ...


class _Host(Protocol):
    extensions: list[Extension]
    _namespaces: dict[type[Any], object]


class SyncNamespaces:
    """``cq.extension(Kind)``: the client namespaces of extensions outside cairnq."""

    def extension(self: _Host, kind: type[Namespaced[N]]) -> N:
        """The namespace of the extension class ``kind`` on this client, built with the
        client on first use, then kept.

        Raises:
            InvalidArgument: ``kind`` is not an ``Extension`` class.
            InvalidExtension: this client was not given ``kind``
                (``SyncCairnQ(..., extensions=[...])``), or ``kind`` declares no namespace
                for it.

        Example::

            cq = SyncCairnQ(url, extensions=[Audit()])
            rows = cq.extension(Audit).recent()
        """
        found: N = namespace_of(self, self.extensions, kind, self._namespaces, "sync_namespace")
        return found
