"""``SyncCairnQ``, the blocking client, exported by ``cairnq.client``: apart, so a process
that only uses ``CairnQ`` never imports the blocking half."""

from __future__ import annotations

from ..extensions._builtins_client_sync import SyncBuiltins
from ..extensions._client_sync import SyncNamespaces
from ._sync import SyncOperations

__all__ = ["SyncCairnQ"]


class SyncCairnQ(SyncBuiltins, SyncNamespaces, SyncOperations):
    """The blocking client: ``CairnQ``'s operations for code without an event loop.

    It takes the same arguments as ``CairnQ``; a ``retention`` policy is swept
    from a daemon thread while the client is open.

    Example::

        with SyncCairnQ.sqlite("tasks.db") as cq:
            task = cq.submit("report.build", {"month": "2026-11"})
            print(cq.wait(task.id).result)
    """
