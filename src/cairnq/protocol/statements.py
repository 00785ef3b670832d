"""Loads the protocol's statements and migrations from package data, once.

``read_statements`` and ``read_migrations`` read a protocol directory laid out as
``sql/<dialect>/<statement>.sql`` (one statement per file, the stem is its name)
and ``migrations/<dialect>/<NNNN_name>.sql`` (applied in file-name order, the
ledger records the file name). The protocol directory holds the reference
protocol's files alone; the kernel keeps its own statements and migrations the
same way in its folder (``kernel/sql/``, ``kernel/migrations/``), and so does
each extension shipped in the package (``extensions/<name>/sql/``,
``extensions/<name>/migrations/``). ``gather_statements`` and
``gather_migrations`` read several such folders into one namespace, where a name
defined twice fails the loading. Backends run what the package ships
(``statements``, ``migrations``: the protocol directory, the kernel's folder and
every extension's) and the folders of extensions outside the package that this
process added (``add_folder``); ``cairnq._sql`` reads any protocol directory with
the kernel's and the shipped extensions' folders and the added ones (``added_roots``).

Statement text is used as written, less its line comments. The only other
transformations, made at load time, are for psycopg: the placeholder style
(SQLite binds ``:name`` natively; psycopg wants ``%(name)s``, and a literal ``%``
doubled) and the indentation (each run of whitespace outside quoted text and block
comments becomes one space or one line break). Each statement records its
parameter names, so a call that passes too few or too many fails loudly.
"""

from __future__ import annotations

import re
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cache
from typing import TYPE_CHECKING, Literal

from ..errors import InvalidArgument

if TYPE_CHECKING:
    if sys.version_info >= (3, 11):
        from importlib.resources.abc import Traversable
    else:
        from importlib.abc import Traversable

Dialect = Literal["sqlite", "postgres"]
DIALECTS: tuple[Dialect, ...] = ("sqlite", "postgres")

_PARAM = re.compile(r"(?<![:\w]):([A-Za-z_]\w*)")
_LINE_COMMENT = re.compile(r"--[^\n]*")
# Kept as written: a string literal (with backslash escapes after E), a quoted
# identifier, a dollar-quoted string, a block comment (not nested). Else a run of
# whitespace.
_SPACING = re.compile(
    r"((?<!\w)[Ee]'(?:[^'\\]|\\.|'')*'"
    r"|'(?:[^']|'')*'"
    r'|"(?:[^"]|"")*"'
    r"|(?<![\w$])\$((?:[A-Za-z_]\w*)?)\$.*?\$\2\$"
    r"|/\*.*?\*/)"
    r"|\s+",
    re.DOTALL,
)


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


def _compact(code: str) -> str:
    """``code``, each whitespace run outside quoted text and comments made one space or newline.

    psycopg caches a query's conversion to the server's placeholders only up to
    4,096 bytes: past that, every execution parses the text again.
    """
    return _SPACING.sub(lambda m: m[1] or ("\n" if "\n" in m[0] else " "), code)


def _to_driver(dialect: Dialect, source: str) -> str:
    if dialect == "sqlite":
        return source
    return _PARAM.sub(r"%(\1)s", _compact(source).replace("%", "%%"))


def _load_statement(dialect: Dialect, name: str, source: str) -> Statement:
    code = _strip_comments(source)
    return Statement(
        name=name,
        dialect=dialect,
        source=source,
        text=_to_driver(dialect, code).strip().rstrip(";"),
        params=frozenset(_PARAM.findall(code)),
    )


_STRING = re.compile(r"'(?:[^']|'')*'")
# insert [or ...] into T, replace into T, update [or ...] [only] T, delete from [only] T,
# merge into T, truncate [table] [only] T[, T...]: the tables a statement writes (read
# with its whitespace collapsed; an upsert's "do update" and a lock's "for [no key]
# update" write nothing of their own).
_WRITE = re.compile(
    r"\b(?:insert\s+(?:or\s+\w+\s+)?into|replace\s+into|merge\s+into"
    r"|(?<!\bdo )(?<!\bfor )(?<!\bkey )update(?:\s+or\s+\w+)?|delete\s+from)"
    r"\s+(?:only\s+)?([\w.\"]+)"
    r"|\btruncate\s+(?:table\s+)?(?:only\s+)?([\w.\"]+(?:\s*,\s*[\w.\"]+)*)",
    re.IGNORECASE,
)
_CREATED = re.compile(r"\bcreate\s+table\s+(?:if\s+not\s+exists\s+)?([\w.\"]+)", re.IGNORECASE)


def _table(name: str) -> str:
    return name.replace('"', "").rsplit(".", 1)[-1].lower()


def written_tables(source: str) -> frozenset[str]:
    """The tables statement text ``source`` writes (``insert``, ``update``, ``delete``,
    ``merge``, ``truncate``), by bare lower-case name; comments and string literals
    are not read."""
    code = " ".join(_STRING.sub("''", _strip_comments(source)).split())
    found: set[str] = set()
    for one, listed in _WRITE.findall(code):
        found.update(_table(name) for name in (listed.split(",") if listed else [one]))
    return frozenset(found)


@cache
def core_tables() -> frozenset[str]:
    """The tables the migrations and statements of the protocol directory and the
    kernel's folder create: the protocol's (``cairnq_tasks``, ``cairnq_task_keys``,
    ``cairnq_meta``), the ledger (``cairnq_migrations``) and the kernel's
    (``cairnq_leases``, ``cairnq_locks``). An extension writes none of them but
    through the kernel's operations."""
    core = (bundled_root(), kernel_root())
    sources = [
        text
        for dialect in DIALECTS
        for text in (
            *(m.source for m in gather_migrations(core, dialect)),
            *(s.source for s in gather_statements(core, dialect).values()),
        )
    ]
    return frozenset(
        _table(name) for source in sources for name in _CREATED.findall(_strip_comments(source))
    )


def bundled_root() -> Traversable:
    """The protocol directory shipped in the package: the reference protocol's
    statements and migrations."""
    from importlib import resources

    return resources.files("cairnq") / "protocol"


def kernel_root() -> Traversable:
    """The kernel's folder of statements and migrations beyond the reference
    protocol's (``cairnq/kernel/``: its ``sql/<dialect>/`` and
    ``migrations/<dialect>/``)."""
    from importlib import resources

    return resources.files("cairnq") / "kernel"


def extension_roots() -> tuple[Traversable, ...]:
    """The folder of each extension shipped in the package that holds statements or
    migrations (``cairnq/extensions/<name>/``), by name."""
    from importlib import resources

    base = resources.files("cairnq") / "extensions"
    return tuple(
        sorted(
            (
                entry
                for entry in base.iterdir()
                if entry.is_dir() and any((entry / kind).is_dir() for kind in ("sql", "migrations"))
            ),
            key=lambda e: e.name,
        )
    )


def check_dialect(dialect: object) -> Dialect:
    """``dialect`` if it is one of ``DIALECTS``.

    Raises:
        InvalidArgument: it is not.
    """
    for known in DIALECTS:
        if dialect == known:
            return known
    raise InvalidArgument(f"dialect must be one of {', '.join(DIALECTS)}, not {dialect!r}")


def _sql_files(
    root: Traversable, kind: str, dialect: Dialect, *, required: bool = True
) -> list[Traversable]:
    folder = root / kind / dialect
    if not folder.is_dir():
        if not required:
            return []
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


def _one_namespace(
    kind: str, roots: Sequence[Traversable], dialect: Dialect
) -> dict[str, tuple[Traversable, Traversable]]:
    """Each ``kind`` file of ``dialect`` in ``roots`` by file name, with its root.

    The first root is a protocol directory and must have the ``kind/<dialect>``
    folder; the others (the kernel's and extensions' folders) may lack it.
    """
    found: dict[str, tuple[Traversable, Traversable]] = {}
    for position, root in enumerate(roots):
        for entry in _sql_files(root, kind, dialect, required=position == 0):
            if entry.name in found:
                first = found[entry.name][0]
                what = "statement" if kind == "sql" else "migration"
                name = entry.name[: -len(".sql")] if kind == "sql" else entry.name
                raise InvalidArgument(
                    f"{what} {name} ({dialect}) is defined twice: in {first} and in {root}; "
                    f"each {what} name belongs to one folder"
                )
            found[entry.name] = (root, entry)
    return found


def gather_statements(roots: Sequence[Traversable], dialect: Dialect) -> dict[str, Statement]:
    """Every statement of ``dialect`` in ``roots`` (a protocol directory first, then
    the kernel's and extensions' folders), by name, in one namespace.

    Raises:
        InvalidArgument: a statement name is in two of ``roots``, or the first root
            has no ``sql/<dialect>`` folder.
    """
    return {
        file_name[: -len(".sql")]: _load_statement(
            dialect, file_name[: -len(".sql")], entry.read_text(encoding="utf-8")
        )
        for file_name, (_, entry) in _one_namespace("sql", roots, dialect).items()
    }


def gather_migrations(roots: Sequence[Traversable], dialect: Dialect) -> tuple[Migration, ...]:
    """Every migration of ``dialect`` in ``roots`` (a protocol directory first, then
    the kernel's and extensions' folders), in file-name order across them all.

    Raises:
        InvalidArgument: a migration's file name is in two of ``roots``, or the
            first root has no ``migrations/<dialect>`` folder.
    """
    found = _one_namespace("migrations", roots, dialect)
    return tuple(
        Migration(name, dialect, found[name][1].read_text(encoding="utf-8"))
        for name in sorted(found)
    )


# Folders of extensions outside the package that this process added (``add_folder``),
# and each dialect's namespace once read: a backend keeps the dict it was given,
# so a folder added later still reaches it (the namespace only grows).
_ADDED: list[Traversable] = []
_NAMESPACES: dict[Dialect, dict[str, Statement]] = {}


def shipped_roots() -> tuple[Traversable, ...]:
    """The folders the package ships beside the protocol directory: the kernel's,
    then each extension's."""
    return (kernel_root(), *extension_roots())


def roots() -> tuple[Traversable, ...]:
    """The folders this process reads: the protocol directory, the kernel's folder,
    every extension folder the package ships, then the folders added with
    ``add_folder``."""
    return (bundled_root(), *shipped_roots(), *_ADDED)


def added_roots() -> tuple[Traversable, ...]:
    """The folders of extensions outside the package this process added, in order."""
    return tuple(_ADDED)


def statements(dialect: Dialect) -> dict[str, Statement]:
    """Every statement of ``dialect`` this process knows (the protocol's, the kernel's,
    every shipped extension's and every added folder's), by name."""
    found = _NAMESPACES.get(dialect)
    if found is None:
        found = _NAMESPACES[dialect] = gather_statements(roots(), dialect)
    return found


@cache
def migrations(dialect: Dialect) -> tuple[Migration, ...]:
    """Every migration of ``dialect`` this process knows (the protocol's, the kernel's,
    every shipped extension's and every added folder's), in file-name order."""
    return gather_migrations(roots(), dialect)


def add_folder(root: Traversable) -> bool:
    """Add the folder of an extension outside the package (its ``sql/<dialect>/`` and
    ``migrations/<dialect>/``) to what this process reads; ``False`` if it was there.

    Every backend of the process then runs its statements, and opening one with
    ``migrate=True`` applies its migrations (after every shipped one: their names
    start ``x_``, which sorts after ``xNNNN``).

    Raises:
        InvalidArgument: one of its statement or migration names is already defined;
            nothing is added then.
    """
    if any(str(known) == str(root) for known in _ADDED):
        return False
    wider = (*roots(), root)
    found = {dialect: gather_statements(wider, dialect) for dialect in DIALECTS}
    for dialect in DIALECTS:
        gather_migrations(wider, dialect)
    _ADDED.append(root)
    for dialect, namespace in _NAMESPACES.items():
        namespace.update(found[dialect])
    migrations.cache_clear()
    return True


def drop_folder(root: Traversable) -> None:
    """Undo ``add_folder(root)`` for this process (a test's clean-up): its statements
    leave every namespace, its migrations the list."""
    _ADDED[:] = [known for known in _ADDED if str(known) != str(root)]
    for dialect, namespace in _NAMESPACES.items():
        kept = gather_statements(roots(), dialect)
        namespace.clear()
        namespace.update(kept)
    migrations.cache_clear()
