"""``migrate()``: bring a database to the current schema from a URL or a backend."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from .errors import InvalidArgument

if TYPE_CHECKING:
    from .extensions import Extension


def migrate(
    target: Any, *, repair: bool = False, extensions: Sequence[Extension] = (), **options: Any
) -> list[str]:
    """Apply pending migrations now and return the file names applied.

    For deployments that open with ``migrate=False`` and upgrade in a window of
    their choosing. A database whose ledger records a migration whose tables,
    indexes or triggers are missing (dropped from outside) is refused, nothing
    applied, unless ``repair`` is given.

    Args:
        target: A ``Backend``, a database URL or a SQLite path.
        repair: Apply the earliest migration whose objects are missing and every
            later one again, in order (the files are safe to re-run); they are
            in the returned list too. Rows lost with a dropped table stay lost.
        extensions: Extensions outside cairnq whose migrations to apply too
            (``cairnq.extensions.install``).
        **options: Backend options when ``target`` is a URL (e.g. ``schema=``).

    Returns:
        The file names applied (or applied again), in order.

    Raises:
        SchemaIncomplete: recorded objects are missing and ``repair`` is false.
        InvalidArgument: a ``Backend`` opened with ``migrate=False``, or ``repair``
            with a ``Backend`` not opened with ``repair=True``.
        InvalidExtension: one of ``extensions`` breaks the rules.

    Example::

        cairnq.migrate("postgresql://db/app", schema="jobs")
    """
    from .backends import Backend, migration_settings, open_backend
    from .extensions import install

    install(extensions)
    if isinstance(target, Backend):
        backend = target
        migrates, repairs, _ = migration_settings(backend)
        if not migrates:
            raise InvalidArgument("this backend was opened with migrate=False; pass a URL")
        if repair and not repairs:
            raise InvalidArgument("this backend was opened without repair=True; pass a URL")
        backend.open()
        return migration_settings(backend)[2]
    backend = open_backend(target, repair=bool(repair), **options)
    try:
        backend.open()
        return migration_settings(backend)[2]
    finally:
        backend.close()
