"""The application side: submit tasks, look them up, wait for them, act on them.

``CairnQ`` is the async client; ``SyncCairnQ`` has the same operations for code
with no event loop (scripts, WSGI views). Both are thin: validation and every
protocol decision live in ``kernel``; the two classes only run operations and wait.

The operations are written once, async, in ``_async.py``; the blocking ones in
``_sync.py`` are generated from them; ``_core.py`` holds what both share. What
only one half has is here, or for ``SyncCairnQ`` in ``_blocking.py`` (imported
when first asked for). Each class inherits the built-in extensions' client
parts (``cairnq.extensions._builtins_client_async``): their namespaces
(``cq.schedules``, ``cq.limits``, ...), the flat methods before them, and
``submit``'s keywords that belong to an extension; and ``extension(Kind)``, the
namespace of an extension outside cairnq.
"""

from __future__ import annotations

from collections.abc import Generator
from typing import TYPE_CHECKING, Any

from .._lazy import exports
from ..extensions._builtins_client_async import AsyncBuiltins
from ..extensions._client_async import AsyncNamespaces
from ._async import AsyncOperations
from ._core import DEFAULT_MAX_POLL_MS as DEFAULT_MAX_POLL_MS
from ._core import DEFAULT_POLL_MS as DEFAULT_POLL_MS
from ._core import DEFAULT_WAIT_TIMEOUT_MS as DEFAULT_WAIT_TIMEOUT_MS
from ._core import DEFAULT_WATCH_POLL_MS as DEFAULT_WATCH_POLL_MS
from ._core import WATCH_BUFFER as WATCH_BUFFER
from ._core import WatchSignal
from ._core import _ClientCore as _ClientCore

if TYPE_CHECKING:
    from ._blocking import SyncCairnQ
else:
    # The blocking client (and its generated half) is imported when first asked for.
    __getattr__, __dir__ = exports(__name__, {"SyncCairnQ": "._blocking"})

__all__ = ["CairnQ", "SyncCairnQ", "WatchSignal"]


class CairnQ(AsyncBuiltins, AsyncNamespaces, AsyncOperations):
    """The async client.

    Args:
        backend: A ``Backend``, a database URL (``sqlite:///tasks.db``,
            ``postgresql://...``), a SQLite file path, or a ``TaskStore``
            (``CairnQ(SQLiteStore("tasks.db"))``: the client runs on the store's
            backend, and its ``max_queue_depth`` gates the store's submits too).
        max_payload_bytes: Largest encoded payload, metadata or result accepted (1 MiB).
        max_json_depth: Deepest nesting accepted in JSON values (64).
        max_queue_depth: Backpressure: an int for every queue or ``{queue: int}``;
            a submit to a queue holding that many queued tasks waits, then raises
            ``QueueFull`` after ``max_queue_wait_ms`` (10 minutes).
        retention: A ``Retention`` (or an int: milliseconds to keep finished
            tasks) swept in the background while the client is open.
        extensions: Extensions outside cairnq (``cairnq.extensions.install``): their
            statements join the process's, opening a backend with ``migrate=True``
            applies their migrations, and a ``Worker`` built on this client runs
            their hooks and parts (besides any given to the worker).
        **backend_options: Options for a backend made from a URL (``busy_timeout_ms``, ...).

    Example::

        async with CairnQ.sqlite("tasks.db") as cq:
            task = await cq.submit("email.send", {"to": "a@example.com"}, key="welcome:42")
            done = await cq.wait(task.id, timeout_ms=10_000)
    """

    def __await__(self) -> Generator[Any, None, CairnQ]:
        return self.open().__await__()
