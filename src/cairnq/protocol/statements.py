"""Loads the protocol's statements and migrations from package data, once.

Statement text is used as written. The only transformation is the placeholder
style, converted at load time: SQLite binds ``:name`` natively; psycopg wants
``%(name)s`` (and a literal ``%`` doubled). Each statement records its
parameter names, so a call that passes too few or too many fails loudly.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import cache
from importlib import resources
from typing import Literal

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


@cache
def statements(dialect: Dialect) -> dict[str, Statement]:
    """Every statement of ``dialect`` by name."""
    folder = resources.files("cairnq") / "protocol" / "sql" / dialect
    out: dict[str, Statement] = {}
    for entry in sorted(folder.iterdir(), key=lambda e: e.name):
        if entry.name.endswith(".sql"):
            name = entry.name[: -len(".sql")]
            out[name] = _load_statement(dialect, name, entry.read_text(encoding="utf-8"))
    return out


@cache
def migrations(dialect: Dialect) -> tuple[Migration, ...]:
    """Every migration of ``dialect``, in file-name order."""
    folder = resources.files("cairnq") / "protocol" / "migrations" / dialect
    return tuple(
        Migration(entry.name, dialect, entry.read_text(encoding="utf-8"))
        for entry in sorted(folder.iterdir(), key=lambda e: e.name)
        if entry.name.endswith(".sql")
    )
