"""Stopping a running handler whose task was canceled.

A cancel of a running task only sets its flag (the protocol's cooperative cancel);
the worker learns of it on its next heartbeat, or when the handler asks
(``ctx.canceled()``, a progress write). Once the worker has seen the cancel of every
task of a call, a ``Stop`` waits the call's grace period, then cancels the call's
``asyncio`` task: an ``async def`` handler sees ``CancelledError`` at its next await
(its ``finally`` and ``except`` blocks run), and a handler running in a child process
(``isolate=True``) has its process killed. The executor then settles the attempt with
a ``fail``, which the pending cancel turns into ``canceled`` (cancel wins in every
SDK's settlement): a stopped attempt never succeeds, and never runs again.

A plain ``def`` handler running in a thread is never stopped: a thread cannot be.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any

from ..durations import exact_duration
from ..errors import error_envelope
from ._context import TaskContext

STOPPED_CODE = "canceled"


class HandlerStopped(Exception):
    """The worker stopped the handler: its task was canceled and the grace period passed."""

    def __init__(self, grace_ms: int) -> None:
        super().__init__(f"stopped {exact_duration(grace_ms)} after its cancel was seen")
        self.grace_ms = grace_ms

    def envelope(self) -> dict[str, Any]:
        """The error the canceled task records: why its handler did not end by itself."""
        return error_envelope(
            "HandlerStopped",
            STOPPED_CODE,
            f"the task was canceled while its handler ran; the handler was still running "
            f"{exact_duration(self.grace_ms)} (cancel_grace) after the worker saw the "
            f"cancel, so the worker stopped it",
            retryable=False,
        )


class Stop:
    """Cancels the current ``asyncio`` task ``grace_ms`` after the worker saw the cancel of
    every one of ``contexts`` (at once when it already had).

    Made on the call's own task; ``disarm`` once the handler has returned or raised,
    before anything is settled, so a stop never lands in a settlement. Until a cancel
    is seen it only hooks the contexts: no timer is armed (the common call costs a hook
    set and cleared per task).
    """

    __slots__ = ("_absorbed", "_contexts", "_task", "_timer", "fired", "grace_ms")

    def __init__(self, contexts: Sequence[TaskContext], grace_ms: int) -> None:
        self._task = asyncio.current_task()
        self._contexts = contexts
        self.grace_ms = grace_ms
        self._timer: asyncio.TimerHandle | None = None
        self.fired = False
        self._absorbed = False
        seen = self._seen
        pending = False
        for ctx in contexts:
            ctx._on_cancel = seen
            if ctx.cancel_seen_at is None:
                pending = True
        if not pending:
            self._seen()

    def _seen(self) -> None:
        if self._timer is not None or self._task is None or self.fired:
            return
        if all(ctx.cancel_seen_at is not None for ctx in self._contexts):
            loop = asyncio.get_running_loop()
            self._timer = loop.call_later(self.grace_ms / 1000, self._fire)

    def _fire(self) -> None:
        assert self._task is not None
        self.fired = True
        self._task.cancel()

    def ours(self) -> bool:
        """Whether the ``CancelledError`` the call raised is this stop's alone (not also a
        stop of the worker, which must go on up); absorbs this stop's cancel."""
        if not self.fired or self._absorbed:
            return False
        return self._absorb() == 0

    def _absorb(self) -> int:
        """Take back this stop's cancel request; how many other requests are left."""
        self._absorbed = True
        uncancel = getattr(self._task, "uncancel", None)  # Python 3.11 and later
        return 0 if uncancel is None else int(uncancel())

    def disarm(self) -> None:
        """The handler has ended: no stop from now on (one that came and was swallowed
        by the handler is taken back)."""
        for ctx in self._contexts:
            ctx._on_cancel = None
        if self._timer is not None:
            self._timer.cancel()
            if self.fired and not self._absorbed:
                self._absorb()
