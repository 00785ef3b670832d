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

T = TypeVar("T")


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

    def _item(self, item: Any, task_id: str | None = None) -> kernel.NewTask: ...

    def _submit_one(self, spec: kernel.NewTask, conn: Any) -> Task: ...

    def _submit_specs(
        self,
        specs: list[kernel.NewTask],
        build: Callable[[list[kernel.NewTask]], Op[list[Task]]],
        conn: Any,
    ) -> list[Task]: ...
