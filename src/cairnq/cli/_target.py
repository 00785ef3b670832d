"""Which database a command works on, looking at it without changing it (through the
backend's ``Inspector``), and opening a client on it."""

from __future__ import annotations

import argparse
import os
import re
from collections.abc import Iterator
from contextlib import closing, contextmanager
from dataclasses import dataclass, field, replace
from typing import Any

from ..backends import (
    Backend,
    Inspection,
    Inspector,
    Registration,
    description_of,
    open_backend,
    registration,
    url_scheme,
)
from ..client import SyncCairnQ
from ..errors import InvalidArgument, UnsupportedBackend
from ..kernel.setup import damage_error, find_damage, is_extension, newer_migrations, pending
from ..protocol.statements import Dialect
from ._errors import CommandError

DEFAULT_DB = "cairnq.db"
_CONNINFO = re.compile(r"^\s*[A-Za-z_]+\s*=")


@dataclass(frozen=True)
class Target:
    """The database a command works on: where it is and, where the backend has them, a schema.

    ``location`` is what opens it again: a SQLite file's path, a PostgreSQL URL;
    ``description`` the backend's words for it, once ``resolve_target`` has asked.
    """

    dialect: Dialect
    location: str
    schema: str | None = None
    entry: Registration | None = field(default=None, compare=False, repr=False)
    description: str | None = field(default=None, compare=False, repr=False)

    def _registration(self) -> Registration:
        entry = self.entry or registration(url_scheme(self.location))
        if entry is None:
            raise InvalidArgument(f"no backend opens {self.location!r}")
        return entry

    def backend_options(self, *, migrate: bool, tool: str = "cli") -> dict[str, Any]:
        """Options for ``open_backend``: sized for a short-lived tool (``cli``, ``dashboard``)."""
        entry = self._registration()
        options: dict[str, Any] = {"schema": self.schema} if entry.has_schemas else {}
        return {**options, "migrate": migrate, **entry.tool_options(tool)}

    def backend(self, *, migrate: bool, tool: str = "cli") -> Backend:
        """A backend on this database, not yet opened."""
        return open_backend(self.location, **self.backend_options(migrate=migrate, tool=tool))

    def describe(self) -> str:
        """The database in words, without any password."""
        if self.description is not None:
            return self.description
        with closing(self.backend(migrate=False)) as backend:
            return description_of(backend)


def resolve_target(db: str | None, schema: str | None) -> Target:
    """The database named by ``--db`` / ``--schema``, falling back to the environment.

    Raises:
        InvalidArgument: an empty ``--db``, an unknown URL scheme, a libpq
            ``key=value`` string, a bad schema name, or ``--schema`` for a backend
            without schemas (SQLite).
    """
    if db is not None and not db.strip():
        raise InvalidArgument(
            f"--db is empty: give a database URL or path, or leave --db out for "
            f"$CAIRNQ_DATABASE_URL, else ./{DEFAULT_DB}"
        )
    text = db or os.environ.get("CAIRNQ_DATABASE_URL") or DEFAULT_DB
    env_schema = os.environ.get("CAIRNQ_SCHEMA") or None
    scheme = url_scheme(text)
    entry = registration(scheme)
    if entry is None:
        raise InvalidArgument(
            f"unsupported database URL scheme {scheme!r}: use sqlite:///path.db, "
            "a file path, or postgresql://user@host/db"
        )
    if not scheme and _CONNINFO.match(text):
        raise InvalidArgument(
            f"{text!r} looks like a libpq key=value string; "
            "give PostgreSQL as a URL: postgresql://user@host:5432/db"
        )
    if entry.has_schemas:
        schema = schema or env_schema
    elif schema:
        raise InvalidArgument("--schema applies to PostgreSQL only")
    target = Target(entry.dialect, entry.location(text), schema, entry)
    # Making the backend checks its options (a schema's name) before any command runs.
    return replace(target, description=target.describe())


def target_of(args: argparse.Namespace) -> Target:
    """The database the command's ``--db`` and ``--schema`` name."""
    return resolve_target(args.db, args.schema)


@contextmanager
def open_client(args: argparse.Namespace, *, create: bool = False) -> Iterator[SyncCairnQ]:
    """A client on the command's database; only ``create=True`` may create or migrate it."""
    target = target_of(args)
    if not create:
        require_cairnq(target)
    client = SyncCairnQ(target.backend(migrate=create), codec=env_codec())
    client._owns_backend = True
    with client:
        yield client


def env_codec() -> Any:
    """The key ring ``CAIRNQ_ENCRYPTION_KEYS`` holds (``cairnq.encryption.keys_from_env``),
    or ``None`` when it is unset: then encrypted values read as ``<encrypted, ...>``."""
    if not os.environ.get("CAIRNQ_ENCRYPTION_KEYS"):
        return None
    from ..encryption import keys_from_env

    return keys_from_env()


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
    damage = find_damage(dialect, found.applied, found.objects)
    if damage:
        raise damage_error(damage, newer_migrations(dialect, found.applied))
