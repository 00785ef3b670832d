"""An extension's client namespace: what it is given (``ClientView``,
``SyncClientView``) and how a client finds it (``namespace_of``, behind
``cq.extension``, in ``_client_async.py`` and its blocking twin).

An extension declares ``Extension.namespace``, a class the async client builds
with itself, and ``Extension.sync_namespace``, the one the blocking client builds
(each optional). ``cq.extension(Audit)`` gives the client's instance, built on
first use and kept for the client's life. The two halves are two classes because
a namespace's methods either await or block: an extension outside cairnq writes
both, as cairnq's own are written async and generated blocking.
"""

from __future__ import annotations

from collections.abc import MutableMapping, Sequence
from typing import Any, Protocol

from .._json import JsonCodec
from ..backends import Backend
from ..errors import InvalidArgument, InvalidExtension
from ..models import Task
from ._base import Extension


class ClientView(Protocol):
    """The async client (``CairnQ``) as an extension's namespace uses it: its backend
    runs the extension's operations (``await client.backend.arun(op, write=...)``)."""

    backend: Backend
    codec: JsonCodec

    async def get(self, task_id: str) -> Task | None:
        """The task with this id, or ``None``."""
        ...


class SyncClientView(Protocol):
    """The blocking client (``SyncCairnQ``) as an extension's namespace uses it: its
    backend runs the extension's operations (``client.backend.run(op, write=...)``)."""

    backend: Backend
    codec: JsonCodec

    def get(self, task_id: str) -> Task | None:
        """The task with this id, or ``None``."""
        ...


def namespace_of(
    client: object,
    extensions: Sequence[Extension],
    kind: type[Any],
    built: MutableMapping[type[Any], object],
    attribute: str,
) -> Any:
    """The namespace ``attribute`` (``"namespace"`` or ``"sync_namespace"``) of the
    extension ``kind`` for ``client``: the one in ``built``, else a new one kept there.

    Raises:
        InvalidArgument: ``kind`` is not an ``Extension`` class.
        InvalidExtension: ``client`` was not given ``kind`` (``extensions``), or
            ``kind`` declares no such namespace.
    """
    found = built.get(kind) if isinstance(kind, type) else None
    if found is not None:
        return found
    if not (isinstance(kind, type) and issubclass(kind, Extension)):
        raise InvalidArgument(f"expected an Extension class (Audit, not Audit()), got {kind!r}")
    name = kind.name
    spelled = f"{kind.__module__}.{kind.__qualname__}"
    factory = getattr(kind, attribute, None)
    if factory is None:
        raise InvalidExtension(
            f"{spelled} declares no namespace for a {type(client).__name__} "
            f"(Extension.{attribute})",
            extension=name,
        )
    if not any(isinstance(extension, kind) for extension in extensions):
        raise InvalidExtension(
            f"this {type(client).__name__} was not given it: create the client with "
            f"{type(client).__name__}(..., extensions=[{kind.__qualname__}()]) "
            f"({kind.__qualname__} from {kind.__module__})",
            extension=name,
        )
    built[kind] = found = factory(client)
    return found
