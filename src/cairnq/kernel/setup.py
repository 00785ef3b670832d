"""Bringing a database to the current schema, and checking what it holds.

Opening a backend runs ``setup_steps``: the PostgreSQL installation check
(before anything is written), the ledger, each pending migration in its own
write transaction (recorded by file name), then the protocol version check.

The ledger and the tables can disagree when objects are dropped from outside:
a migration is recorded while its tables, indexes or triggers are gone. Opening
with ``migrate=True`` (and ``migrate()``) then refuses with ``SchemaIncomplete``
naming what is missing, unless asked to ``repair``: the migration files are
written to be re-run (``create ... if not exists``), so the earliest damaged
migration and every one after it are applied again, in order, which also puts
back what later migrations reshape (a re-created index, the schema_version).
"""

from __future__ import annotations

import re
from collections.abc import Collection, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from ..errors import SchemaIncomplete
from ..protocol.statements import Dialect, migrations
from ..protocol.steps import Call, Op, Setup, SetupStep
from .ledger import applied_migrations, apply_migration, check_protocol_version

# Creation and removal of named objects in a migration file, in textual order.
_DDL = re.compile(
    r"\b(create|drop)\s+(?:or\s+replace\s+)?(?:unique\s+)?(table|index|trigger|function)\s+"
    r"(?:if\s+(?:not\s+)?exists\s+)?([A-Za-z_][A-Za-z0-9_]*)",
    re.IGNORECASE,
)
_LINE_COMMENT = re.compile(r"--[^\n]*")
_KIND_ORDER = ("table", "function", "trigger", "index")

SchemaObject = tuple[str, str]
"""``(kind, name)``: kind is ``table``, ``index``, ``trigger`` or ``function``."""


@dataclass(frozen=True)
class Damage:
    """A migration the ledger records as applied whose objects are missing."""

    migration: str
    missing: tuple[SchemaObject, ...]


def expected_objects(dialect: Dialect, applied: Collection[str]) -> dict[SchemaObject, str]:
    """The objects the applied migrations leave behind, each with the migration that
    last created it (an object a later migration drops is not expected)."""
    expected: dict[SchemaObject, str] = {}
    for migration in migrations(dialect):
        if migration.name not in applied:
            continue
        for verb, kind, name in _DDL.findall(_LINE_COMMENT.sub("", migration.source)):
            key = (kind.lower(), name.lower())
            if verb.lower() == "create":
                expected[key] = migration.name
            else:
                expected.pop(key, None)
    return expected


def find_damage(
    dialect: Dialect, applied: Collection[str], present: Iterable[SchemaObject]
) -> list[Damage]:
    """The applied migrations whose objects are not all ``present``, in migration order.

    When the ledger also names migrations this version does not ship (a newer SDK
    upgraded the database), any of them may have dropped an index or a trigger, so
    only missing tables count: protocol_version 1 keeps every table.
    """
    have = {(kind, name.lower()) for kind, name in present}
    newer = bool(newer_migrations(dialect, applied))
    missing: dict[str, list[SchemaObject]] = {}
    for key, migration in expected_objects(dialect, applied).items():
        if key not in have and not (newer and key[0] != "table"):
            missing.setdefault(migration, []).append(key)
    return [
        Damage(m.name, tuple(sorted(missing[m.name], key=_object_order)))
        for m in migrations(dialect)
        if m.name in missing
    ]


def newer_migrations(dialect: Dialect, applied: Collection[str]) -> list[str]:
    """Migrations the ledger records that this version does not ship.

    An extension outside the package (``x_<name>_NNNN_<what>.sql``) is not cairnq's:
    a process that does not know it sees its migrations but none is newer.
    """
    known = {m.name for m in migrations(dialect)}
    return sorted(m for m in set(applied) - known if not is_third_party(m))


def _object_order(item: SchemaObject) -> tuple[int, str]:
    return _KIND_ORDER.index(item[0]), item[1]


def describe_missing(objects: Iterable[SchemaObject]) -> str:
    """``table cairnq_tasks, trigger cairnq_tasks_notify and 9 indexes``: tables by name,
    other kinds by name up to three of a kind, else counted."""
    by_kind: dict[str, list[str]] = {}
    for kind, name in sorted(objects, key=_object_order):
        by_kind.setdefault(kind, []).append(name)
    parts: list[str] = []
    for kind, names in by_kind.items():
        plural = "indexes" if kind == "index" else kind + "s"
        if kind == "table" or len(names) == 1:
            parts += [f"{kind} {name}" for name in names]
        elif len(names) <= 3:
            parts.append(f"{plural} {', '.join(names)}")
        else:
            parts.append(f"{len(names)} {plural}")
    return parts[0] if len(parts) == 1 else f"{', '.join(parts[:-1])} and {parts[-1]}"


def damage_error(damage: Sequence[Damage], newer: Sequence[str] = ()) -> SchemaIncomplete:
    """The one-line refusal for ``damage``, naming what is missing and how to repair it;
    ``newer``: migrations the ledger records that this version lacks, so cannot repair."""
    first = damage[0].migration
    recorded = first if len(damage) == 1 else f"{first} and {len(damage) - 1} later migrations"
    objects = [obj for d in damage for obj in d.missing]
    verb = "is" if len(objects) == 1 else "are"
    remedy = (
        f"`cairnq migrate --repair` (migrate(..., repair=True)) applies {first} and every "
        "migration after it again (rows lost with a table stay lost)"
    )
    if newer:
        remedy = (
            f"this version cannot repair it: the ledger also records {', '.join(newer)}, "
            "which it does not ship; repair with the version that does"
        )
    return SchemaIncomplete(
        f"the migration ledger records {recorded} as applied, but {describe_missing(objects)} "
        f"{verb} missing; {remedy}",
        missing=tuple(f"{kind} {name}" for kind, name in objects),
    )


def present_objects() -> Op[set[SchemaObject]]:
    """The cairnq_* tables, indexes, triggers and functions the database holds."""
    rows = yield Call("schema_objects", {})
    return {(str(r["kind"]), str(r["name"])) for r in rows}


def _ledger_create() -> Op[None]:
    yield Call("ledger_guard", {})
    yield Call("ledger_create", {})


@dataclass(frozen=True)
class Survey:
    """What a read of the ledger and the catalog found: migrations not recorded yet, and
    recorded ones whose objects are missing (to be confirmed under the ledger lock)."""

    pending: list[str]
    damage: list[Damage]


def _survey(dialect: Dialect) -> Op[Survey]:
    rows = yield Call("ledger_exists", {})
    if not rows or not rows[0]["present"]:
        return Survey([m.name for m in migrations(dialect)], [])
    # The ledger first: a migration committing between the two reads can only make the
    # catalog look ahead of the ledger (an index a newer migration dropped then seems
    # missing), and the confirmation under the ledger lock clears such a false alarm.
    applied = yield from applied_migrations()
    present = yield from present_objects()
    return Survey(pending(dialect, applied), find_damage(dialect, applied, present))


def _confirm_damage(dialect: Dialect, *, repair: bool) -> Op[str | None]:
    """Under the ledger lock: the migration to apply again from, ``None`` if nothing is
    missing after all; without ``repair``, damage raises ``SchemaIncomplete``."""
    yield Call("ledger_lock", {})
    applied = yield from applied_migrations()
    present = yield from present_objects()
    damage = find_damage(dialect, applied, present)
    if not damage:
        return None
    newer = newer_migrations(dialect, applied)
    if not repair or newer:
        # Re-running this version's files over a newer schema would undo the newer
        # migrations' work (schema_version, reshaped indexes).
        raise damage_error(damage, newer)
    return damage[0].migration


def setup_steps(
    dialect: Dialect,
    *,
    migrate: bool,
    repair: bool = False,
    installation_check: Op[Any] | None = None,
) -> Setup:
    """What opening a database does, in order; send each step's result back in.

    A database with nothing pending and nothing missing is only read, so opening
    it takes no write lock. With ``repair``, the earliest migration whose objects
    are missing and every later one are applied again.
    """
    if installation_check is not None:
        yield SetupStep(installation_check, write=False)
    if migrate:
        survey = yield SetupStep(_survey(dialect), write=False)
        start = None
        if survey.pending:
            yield SetupStep(_ledger_create(), write=True)
        if survey.damage:
            start = yield SetupStep(_confirm_damage(dialect, repair=repair), write=True)
        if survey.pending or start is not None:
            again = False
            for migration in migrations(dialect):
                again = again or migration.name == start
                yield SetupStep(
                    apply_migration(migration.name, migration.source, again=again),
                    write=True,
                    migration=migration.name,
                )
    yield SetupStep(check_protocol_version(), write=False)


EXTENSION_PREFIX = "x"
THIRD_PARTY_PREFIX = "x_"


def is_extension(name: str) -> bool:
    """Whether a migration is one of cairnq's additive extensions (not the shared protocol)."""
    return name.startswith(EXTENSION_PREFIX)


def is_third_party(name: str) -> bool:
    """Whether a migration belongs to an extension outside the package (``x_<name>_...``)."""
    return name.startswith(THIRD_PARTY_PREFIX)


def pending(dialect: Dialect, applied: set[str]) -> list[str]:
    """Migration file names of ``dialect`` the ledger does not record yet."""
    return [m.name for m in migrations(dialect) if m.name not in applied]
