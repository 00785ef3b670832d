"""Looking at a database without changing it, through the backend's ``Inspector``."""

from __future__ import annotations

import os
from contextlib import closing
from typing import TYPE_CHECKING

from ..backends import Inspection, Inspector
from ..errors import UnsupportedBackend
from ..protocol.setup import damage_error, is_extension, newer_migrations, pending
from ._errors import CommandError

if TYPE_CHECKING:
    from ._target import Target


def inspect_database(target: Target) -> Inspection:
    """Read the migration ledger without creating, locking or migrating anything.

    Raises:
        UnsupportedBackend: the database's backend cannot be inspected.
    """
    with closing(target.backend(migrate=False)) as backend:
        if not isinstance(backend, Inspector):
            raise UnsupportedBackend(
                f"the {backend.dialect} backend cannot be inspected; "
                "the command line needs a backend with inspect()"
            )
        return backend.inspect()


def require_cairnq(target: Target) -> None:
    """Refuse, with one clear line, a database that is missing or not fully migrated.

    Raises:
        CommandError: no SQLite file there, no cairnq tables, or protocol migrations pending.
        SchemaIncomplete: objects the ledger records as created are missing.
    """
    found = inspect_database(target)
    if not found.exists:
        # Only a database file can be missing: name it in full, so that a user who
        # meant another file (tasks.db, not the default cairnq.db) sees which one.
        raise CommandError(
            f"no cairnq database at {os.path.abspath(target.location)}; "
            "run `cairnq migrate` first (or pass --db)"
        )
    description = target.describe()
    if not found.applied:
        hint = ""
        if found.other_schemas:
            shown = ", ".join(found.other_schemas[:3])
            more = ", ..." if len(found.other_schemas) > 3 else ""
            hint = f" (schemas with cairnq tables: {shown}{more}; pick one with --schema)"
        raise CommandError(
            f"{description} is not a cairnq database; run `cairnq migrate` first{hint}"
        )
    dialect = target.dialect
    # A database another SDK created lacks only cairnq's extensions: still readable.
    missing = [m for m in pending(dialect, set(found.applied)) if not is_extension(m)]
    if missing:
        raise CommandError(
            f"{description} has {len(missing)} pending migration(s) "
            f"({', '.join(missing)}); run `cairnq migrate` first"
        )
    damage = found.damage(dialect)
    if damage:
        raise damage_error(damage, newer_migrations(dialect, found.applied))
