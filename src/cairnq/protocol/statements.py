"""Loads the protocol's statements and migrations from package data, once.

``read_statements`` and ``read_migrations`` read a protocol directory laid out as
``sql/<dialect>/<statement>.sql`` (one statement per file, the stem is its name)
and ``migrations/<dialect>/<NNNN_name>.sql`` (applied in file-name order, the
ledger records the file name). Backends run the directory shipped in the
package (``statements``, ``migrations``); ``cairnq._sql`` reads any directory.

Statement text is used as written. The only transformation is the placeholder
style, converted at load time: SQLite binds ``:name`` natively; psycopg wants
``%(name)s`` (and a literal ``%`` doubled). Each statement records its
parameter names, so a call that passes too few or too many fails loudly.
"""

from __future__ import annotations

import re
import sys
from dataclasses import dataclass
from functools import cache
from importlib import resources
from typing import Literal

from ..errors import InvalidArgument

if sys.version_info >= (3, 11):
    from importlib.resources.abc import Traversable
else:
    from importlib.abc import Traversable

Dialect = Literal["sqlite", "postgres"]
DIALECTS: tuple[Dialect, ...] = ("sqlite", "postgres")

_PARAM = re.compile(r"(?<![:\w]):([A-Za-z_]\w*)")
_LINE_COMMENT = re.compile(r"--[^\n]*")


@dataclass(frozen=True)
class Statement:
    """One canonical statement: its name, its text for the driver, its parameters."""

    name: str
    dialect: Dialect
    source: str
    text: str
    params: frozenset[str]


@dataclass(frozen=True)
class Migration:
    """One migration file; ``name`` is the file name the ledger records."""

    name: str
    dialect: Dialect
    source: str


def _strip_comments(source: str) -> str:
    return _LINE_COMMENT.sub("", source)


def _to_driver(dialect: Dialect, source: str) -> str:
    if dialect == "sqlite":
        return source
    return _PARAM.sub(r"%(\1)s", source.replace("%", "%%"))


def _load_statement(dialect: Dialect, name: str, source: str) -> Statement:
    code = _strip_comments(source)
    return Statement(
        name=name,
        dialect=dialect,
        source=source,
        text=_to_driver(dialect, code).strip().rstrip(";"),
        params=frozenset(_PARAM.findall(code)),
    )


def bundled_root() -> Traversable:
    """The protocol directory shipped in the package."""
    return resources.files("cairnq") / "protocol"


def check_dialect(dialect: object) -> Dialect:
    """``dialect`` if it is one of ``DIALECTS``.

    Raises:
        InvalidArgument: it is not.
    """
    for known in DIALECTS:
        if dialect == known:
            return known
    raise InvalidArgument(f"dialect must be one of {', '.join(DIALECTS)}, not {dialect!r}")


def _sql_files(root: Traversable, kind: str, dialect: Dialect) -> list[Traversable]:
    folder = root / kind / dialect
    if not folder.is_dir():
        raise InvalidArgument(f"protocol directory {root} has no {kind}/{dialect} folder")
    return sorted(
        (entry for entry in folder.iterdir() if entry.name.endswith(".sql")),
        key=lambda e: e.name,
    )


def read_statements(root: Traversable, dialect: Dialect) -> dict[str, Statement]:
    """Every statement of ``dialect`` in the protocol directory ``root``, by name.

    Raises:
        InvalidArgument: ``root`` has no ``sql/<dialect>`` folder.
    """
    return {
        entry.name[: -len(".sql")]: _load_statement(
            dialect, entry.name[: -len(".sql")], entry.read_text(encoding="utf-8")
        )
        for entry in _sql_files(root, "sql", dialect)
    }


def read_migrations(root: Traversable, dialect: Dialect) -> tuple[Migration, ...]:
    """Every migration of ``dialect`` in the protocol directory ``root``, in file-name order.

    Raises:
        InvalidArgument: ``root`` has no ``migrations/<dialect>`` folder.
    """
    return tuple(
        Migration(entry.name, dialect, entry.read_text(encoding="utf-8"))
        for entry in _sql_files(root, "migrations", dialect)
    )


@cache
def statements(dialect: Dialect) -> dict[str, Statement]:
    """Every statement of ``dialect`` the package ships, by name."""
    return read_statements(bundled_root(), dialect)


@cache
def migrations(dialect: Dialect) -> tuple[Migration, ...]:
    """Every migration of ``dialect`` the package ships, in file-name order."""
    return read_migrations(bundled_root(), dialect)
