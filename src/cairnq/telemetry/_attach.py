"""Attaching an instrumentation to clients and workers, once each, reversibly."""

from __future__ import annotations

import weakref
from collections.abc import Callable
from typing import Any

from ..client import _ClientCore
from ..errors import InvalidArgument
from ..hooks import SubmitHook
from ..worker import TaskEvent, Worker
from ..worker._context import CallScope

Detach = Callable[[], None]


class Attachments:
    """What one instrumentation attached to which targets, so it attaches once per target."""

    def __init__(
        self,
        *,
        submit_hook: SubmitHook,
        listener: Callable[[TaskEvent], None],
        scope: CallScope | None = None,
    ) -> None:
        self._submit_hook = submit_hook
        self._listener = listener
        self._scope = scope
        self._attached: weakref.WeakKeyDictionary[Any, Detach] = weakref.WeakKeyDictionary()

    def attach(self, target: Any) -> Detach:
        """Attach to a client (submit hook) or a worker (events, scope, and its client)."""
        if isinstance(target, Worker):
            return self._once(target, lambda: self._attach_worker(target))
        if isinstance(target, _ClientCore):
            return self._once(target, lambda: target.add_submit_hook(self._submit_hook))
        raise InvalidArgument(
            f"instrument() takes a CairnQ, SyncCairnQ or Worker, not {type(target).__name__}"
        )

    def _once(self, target: Any, attach: Callable[[], Detach]) -> Detach:
        existing = self._attached.get(target)
        if existing is not None:
            return existing
        undo = attach()

        def detach() -> None:
            if self._attached.get(target) is detach:
                del self._attached[target]
                undo()

        self._attached[target] = detach
        return detach

    def _attach_worker(self, worker: Worker) -> Detach:
        undo: list[Detach] = [worker.subscribe(self._listener)]
        if self._scope is not None:
            undo.append(worker.add_call_scope(self._scope))
        # Handlers' ctx.submit goes through the worker's client.
        if worker.client not in self._attached:
            undo.append(self.attach(worker.client))

        def detach() -> None:
            for step in reversed(undo):
                step()

        return detach
