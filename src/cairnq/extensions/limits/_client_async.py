"""The client's limits: ``cq.limits``, and the flat methods before it (kept for one
release, each warning once), async.

``scripts/generate_sync.py`` turns this file into ``_client_sync.py`` beside it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..._deprecated import renamed
from ..._sealing import refuse_payload_path
from .._client_async import ClientView

if TYPE_CHECKING:
    from ._model import Limit, LimitUsage

    LimitList = list[Limit]
    LimitUsageList = list[LimitUsage]


class AsyncLimits:
    """``cq.limits``: concurrency and rate limits stored in the database, which every
    cairnq worker on it enforces when it claims (see ``cairnq.limits``)."""

    __slots__ = ("_client",)

    def __init__(self, client: ClientView) -> None:
        self._client = client

    async def set(self, limit: Limit) -> Limit:
        """Store a concurrency or rate limit that every cairnq worker on the database enforces.

        Replaces a limit of the same id; workers apply the change within about a
        second. A function key is computed only by workers that declare the limit.

        Args:
            limit: ``Limit.concurrency(...)`` or ``Limit.rate(...)``.

        Returns:
            The limit as stored (``source="operator"``).

        Raises:
            InvalidArgument: ``limit`` is not a ``Limit``, or is keyed by a payload path
                on a client whose payloads are encrypted (``codec=``).
            SchemaIncomplete: the database lacks the limits tables (``cairnq migrate``).

        Example::

            await cq.limits.set(Limit.concurrency(2, queue="emails", key="payload.customer"))
        """
        from . import _ops

        if self._client.codec.sealer is not None:
            refuse_payload_path(getattr(limit, "key", None), f"limit {getattr(limit, 'id', '')!r}")
        return await self._client._run(_ops.put(limit, source="operator"), write=True)

    async def list(self) -> LimitList:
        """Every stored limit (declared by workers or set by operators), by id."""
        from . import _ops

        return await self._client._run(_ops.list_all(), write=False)

    async def remove(self, limit_id: str) -> bool:
        """Delete a stored limit; ``False`` when none has the id.

        A worker that declares it stores it again when it next starts.
        """
        from . import _ops

        return await self._client._run(_ops.remove(limit_id), write=True)

    async def usage(self) -> LimitUsageList:
        """Each stored limit's running tasks per key, waiting tasks and rate tokens, now."""
        from . import _ops

        return await self._client._run(_ops.usage(), write=False)


class AsyncLimitsClient:
    """The client's ``limits`` namespace, and its flat methods (each the same as the
    namespace's method it names, deprecated: it warns once, ``CairnQDeprecationWarning``)."""

    @property
    def limits(self: ClientView) -> AsyncLimits:
        """Concurrency and rate limits every cairnq worker enforces: ``set``, ``list``,
        ``remove``, ``usage``."""
        return AsyncLimits(self)

    async def set_limit(self: ClientView, limit: Limit) -> Limit:
        """Deprecated: ``cq.limits.set``, which see."""
        renamed("cq.set_limit(...)", "cq.limits.set(...)")
        return await AsyncLimits(self).set(limit)

    async def list_limits(self: ClientView) -> LimitList:
        """Deprecated: ``cq.limits.list``."""
        renamed("cq.list_limits()", "cq.limits.list()")
        return await AsyncLimits(self).list()

    async def remove_limit(self: ClientView, limit_id: str) -> bool:
        """Deprecated: ``cq.limits.remove``."""
        renamed("cq.remove_limit(...)", "cq.limits.remove(...)")
        return await AsyncLimits(self).remove(limit_id)

    async def limit_usage(self: ClientView) -> LimitUsageList:
        """Deprecated: ``cq.limits.usage``."""
        renamed("cq.limit_usage()", "cq.limits.usage()")
        return await AsyncLimits(self).usage()
