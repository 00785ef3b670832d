"""What a plain ``def`` handler's context is built on: ``BlockingContext``, a blocking view
of the handler's ``TaskContext``. ``SyncTaskContext`` (generated, ``_context_sync``) is
it and a blocking twin of each of ``TaskContext``'s public async methods.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Coroutine
from typing import Any, TypeVar

from .._handoff import run_from_thread
from ._context_async import TaskContext

T = TypeVar("T")


class BlockingContext:
    """A ``TaskContext`` seen from the thread its plain ``def`` handler runs in.

    Each method runs the async one on the worker's event loop and blocks the handler's
    thread until it is done; the code of the handler's own that it calls (a step's
    function) runs in that thread. What is not a method (``task``, ``payload``,
    ``attempt``, ...) is the async context's.
    """

    def __init__(self, inner: TaskContext, loop: asyncio.AbstractEventLoop) -> None:
        self._inner = inner
        self._loop = loop

    def __repr__(self) -> str:
        return repr(self._inner).replace("TaskContext", type(self).__name__, 1)

    def _call(self, coro: Coroutine[Any, Any, T]) -> T:
        """Run ``coro`` on the worker's loop; block until it is done."""
        return run_from_thread(coro, self._loop)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)

    @property
    def lease_lost(self) -> threading.Event:
        """Set when the lease is lost (a ``threading.Event``, usable from the handler thread)."""
        return self._inner._thread_lost_event()
