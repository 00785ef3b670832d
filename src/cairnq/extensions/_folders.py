"""Extensions outside cairnq: their declaration checked against the naming rules, and
their folders added to the statements and migrations this process knows.

An extension outside the package names its ``package`` (``Extension.package``),
whose ``migrations/<dialect>/`` hold ``x_<name>_NNNN_<what>.sql`` files (each one
declared in ``migrations``, in every dialect's folder) and whose ``sql/<dialect>/``
hold statements named ``<name>_*``, which write only its own tables (never the
protocol's, the ledger or the kernel's: ``protocol.statements.core_tables``); its
tables are ``cairnq_<name>_*``. Its name is not one of cairnq's own. ``install``
refuses anything else with ``InvalidExtension`` before adding a thing, then adds
the folder (``protocol.statements.add_folder``): from then on every backend of the
process runs its statements, and opening one with ``migrate=True`` applies its
migrations after cairnq's.
"""

from __future__ import annotations

import re
import sys
from collections.abc import Collection, Sequence
from typing import TYPE_CHECKING

from ..errors import InvalidArgument, InvalidExtension
from ..protocol.statements import DIALECTS, add_folder, core_tables, written_tables
from ._base import Extension, listed

if TYPE_CHECKING:
    if sys.version_info >= (3, 11):
        from importlib.resources.abc import Traversable
    else:
        from importlib.abc import Traversable

_NAME = re.compile(r"[a-z][a-z0-9]*(?:_[a-z0-9]+)*\Z")
_WHAT = r"[a-z0-9]+(?:_[a-z0-9]+)*\.sql\Z"


def _files(root: Traversable, kind: str, dialect: str) -> list[str]:
    folder = root / kind / dialect
    if not folder.is_dir():
        return []
    return sorted(entry.name for entry in folder.iterdir() if entry.name.endswith(".sql"))


def folder_of(extension: Extension, taken: Collection[str]) -> Traversable:
    """The folder of ``extension``'s package, once its declaration follows the rules.

    Raises:
        InvalidExtension: its name is malformed or ``taken``, its package does not
            import, a migration, statement or table breaks the naming rules, or a
            statement writes a table of cairnq's own.
    """
    name = str(getattr(extension, "name", ""))

    def refuse(message: str) -> InvalidExtension:
        return InvalidExtension(message, extension=name or repr(extension))

    if not _NAME.match(name):
        raise refuse("a name is lower-case letters and digits, words joined by _")
    if name in taken:
        raise refuse(f"{name} is the name of one of cairnq's own extensions")
    from importlib import resources

    try:
        root = resources.files(str(extension.package))
    except (ImportError, TypeError) as exc:
        raise refuse(f"its package {extension.package!r} does not import: {exc}") from None
    migration = re.compile(rf"x_{re.escape(name)}_\d{{4}}_{_WHAT}")
    for declared in extension.migrations:
        if not migration.match(declared):
            raise refuse(f"migration {declared} is not named x_{name}_NNNN_<what>.sql")
    for dialect in DIALECTS:
        found = _files(root, "migrations", dialect)
        for file in found:
            if file not in extension.migrations:
                raise refuse(f"migrations/{dialect}/{file} is not in its declared migrations")
        for declared in extension.migrations:
            if declared not in found:
                raise refuse(f"its migration {declared} is not in migrations/{dialect}/")
        for file in _files(root, "sql", dialect):
            if not file.startswith(f"{name}_"):
                raise refuse(f"statement sql/{dialect}/{file} is not named {name}_*")
            text = (root / "sql" / dialect / file).read_text(encoding="utf-8")
            core = sorted(written_tables(text) & core_tables())
            if core:
                raise refuse(
                    f"statement sql/{dialect}/{file} writes {', '.join(core)}, cairnq's own; "
                    "an extension changes tasks through cairnq.kernel's operations"
                )
    for table in extension.tables:
        if not table.startswith(f"cairnq_{name}_"):
            raise refuse(f"table {table} is not named cairnq_{name}_*")
    return root


def install(extensions: Sequence[Extension]) -> list[Extension]:
    """``extensions`` as a list, each one outside cairnq (with a ``package``) checked
    and its folder added to what this process reads (once; again is a no-op).

    Raises:
        InvalidArgument: ``extensions`` is no list of them (``listed``).
        InvalidExtension: one breaks the rules (``folder_of``), or a statement or
            migration name of its folder is already defined; nothing of it is added.
    """
    extensions = listed(extensions)
    outside = [e for e in extensions if isinstance(e, Extension) and e.package is not None]
    if outside:
        from ._registry import builtins  # the registry loads on first use (see __init__)

        taken = {e.name for e in builtins()}
        for extension in outside:
            root = folder_of(extension, taken)
            try:
                add_folder(root)
            except InvalidArgument as exc:
                raise InvalidExtension(str(exc), extension=extension.name) from None
    return list(extensions)
