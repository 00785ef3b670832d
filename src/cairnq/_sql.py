"""The protocol files as text, where the reference SDK's tests and tools look for them.

A protocol directory holds ``sql/<dialect>/<statement>.sql`` and
``migrations/<dialect>/<NNNN_name>.sql``. ``find_protocol_root()`` is the one
named by the ``CAIRNQ_PROTOCOL_DIR`` environment variable, else the one shipped
in the package (the reference protocol's files); ``load_statements`` and
``load_migrations`` read it, with the kernel's statements and migrations, the
extensions' shipped in the package (``kernel/sql/``, ``kernel/migrations/``,
``extensions/<name>/sql/``, ``migrations/``) and those of the extensions outside
it that this process installed (``cairnq.extensions.install``, which
``CairnQ(extensions=...)`` calls), with the loader the backends use. The backends
themselves always run the shipped files and the installed extensions'.

Example::

    from cairnq._sql import load_migrations, load_statements

    sql = load_statements("sqlite")["get"]
    for name, text in load_migrations("postgres"):
        ...
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from .errors import InvalidArgument
from .protocol.statements import (
    added_roots,
    bundled_root,
    check_dialect,
    gather_migrations,
    gather_statements,
    shipped_roots,
)

if TYPE_CHECKING:
    if sys.version_info >= (3, 11):
        from importlib.resources.abc import Traversable
    else:
        from importlib.abc import Traversable

__all__ = ["PROTOCOL_DIR_ENV", "find_protocol_root", "load_migrations", "load_statements"]

PROTOCOL_DIR_ENV = "CAIRNQ_PROTOCOL_DIR"


def find_protocol_root() -> Path:
    """The protocol directory: ``$CAIRNQ_PROTOCOL_DIR`` when set, else the shipped one.

    Raises:
        InvalidArgument: ``CAIRNQ_PROTOCOL_DIR`` names no directory, or one
            without ``sql/`` and ``migrations/`` folders.
    """
    given = os.environ.get(PROTOCOL_DIR_ENV)
    if not given:
        shipped = bundled_root()
        return shipped if isinstance(shipped, Path) else Path(str(shipped))
    root = Path(given).expanduser()
    if not root.is_dir():
        raise InvalidArgument(f"{PROTOCOL_DIR_ENV}={given!r} is not a directory")
    missing = [folder + "/" for folder in ("sql", "migrations") if not (root / folder).is_dir()]
    if missing:
        raise InvalidArgument(
            f"{PROTOCOL_DIR_ENV}={given!r} is not a cairnq protocol directory: it has no "
            f"{' and no '.join(missing)} folder (it needs sql/<dialect>/*.sql and "
            "migrations/<dialect>/*.sql)"
        )
    return root


def load_statements(dialect: str, root: str | os.PathLike[str] | None = None) -> dict[str, str]:
    """Every statement of ``dialect`` (``"sqlite"`` or ``"postgres"``): file stem to text.

    The protocol directory's, the kernel's, the shipped extensions' and the installed
    ones'. The text is the file's, comments included. ``root`` defaults to
    ``find_protocol_root()``.

    Raises:
        InvalidArgument: an unknown dialect, a protocol directory without
            ``sql/<dialect>``, or a statement name defined twice.
    """
    found = gather_statements(_roots(root), check_dialect(dialect))
    return {name: statement.source for name, statement in found.items()}


def load_migrations(
    dialect: str, root: str | os.PathLike[str] | None = None
) -> list[tuple[str, str]]:
    """Every migration of ``dialect`` as ``(file name, text)``, in the order they apply.

    The protocol directory's, the kernel's, the shipped extensions' and the installed
    ones'. The file name (``0001_init.sql``) is what the migration ledger records.
    ``root`` defaults to ``find_protocol_root()``.

    Raises:
        InvalidArgument: an unknown dialect, a protocol directory without
            ``migrations/<dialect>``, or a migration file name defined twice.
    """
    found = gather_migrations(_roots(root), check_dialect(dialect))
    return [(migration.name, migration.source) for migration in found]


def _roots(root: str | os.PathLike[str] | None) -> tuple[Traversable, ...]:
    found = find_protocol_root() if root is None else Path(root)
    return (found, *shipped_roots(), *added_roots())
