"""``cairnq migrate``: apply, preview (``--dry-run``) or list (``--status``) migrations."""

from __future__ import annotations

import argparse
from typing import TextIO

from ..kernel.setup import damage_error, describe_missing, find_damage, newer_migrations
from ..migrate import migrate
from ..protocol.statements import Dialect, migrations
from ._render import iso, write_lines
from ._target import Target, inspect_database, target_of


def cmd_migrate(args: argparse.Namespace, out: TextIO) -> int:
    """``cairnq migrate``."""
    target = target_of(args)
    if args.status:
        write_lines(out, migration_status(target))
        return 0
    found = inspect_database(target)
    damage = find_damage(target.dialect, found.applied, found.objects)
    newer = newer_migrations(target.dialect, found.applied)
    if damage and (newer or not args.repair):
        raise damage_error(damage, newer)
    if args.dry_run:
        start = damage[0].migration if damage else None
        again = False
        lines = []
        for name in (m.name for m in migrations(target.dialect)):
            again = again or name == start
            if name not in found.applied:
                lines.append(f"would apply  {name}")
            elif again:
                lines.append(f"would apply again  {name}")
        if not lines:
            lines = [f"nothing to apply: {target.describe()} is up to date"]
        write_lines(out, lines + gap_note(target.dialect, [ln.split()[-1] for ln in lines]))
        return 0
    options = target.backend_options(migrate=True)
    applied = migrate(target.location, repair=args.repair, **options)
    if applied:
        write_lines(
            out,
            [f"applied again  {n}" if n in found.applied else f"applied  {n}" for n in applied]
            + gap_note(target.dialect, applied),
        )
    else:
        out.write(f"nothing to apply: {target.describe()} is up to date\n")
    return 0


def migration_status(target: Target) -> list[str]:
    """``applied``, ``damaged`` (with what is missing) or ``pending``, one line per migration;
    a last line says how to repair when something is damaged."""
    found = inspect_database(target)
    damage = {d.migration: d for d in find_damage(target.dialect, found.applied, found.objects)}
    lines = []
    # File-name order is migration order; the ledger may also name files this version lacks.
    for name in sorted({m.name for m in migrations(target.dialect)} | set(found.applied)):
        if name not in found.applied:
            lines.append(f"pending  {name}")
        elif name in damage:
            missing = describe_missing(damage[name].missing)
            lines.append(f"damaged  {name}  {iso(found.applied[name])}  missing {missing}")
        else:
            lines.append(f"applied  {name}  {iso(found.applied[name])}")
    lines += gap_note(target.dialect, [line.split()[1] for line in lines])
    newer = newer_migrations(target.dialect, found.applied)
    if damage and newer:
        lines.append(
            "the ledger records objects that are missing: repair them with the cairnq "
            f"version that ships {', '.join(newer)}"
        )
    elif damage:
        first = next(iter(damage))
        lines.append(
            f"the ledger records objects that are missing: `cairnq migrate --repair` applies "
            f"{first} and every migration after it again"
        )
    return lines


NOTIFY_MIGRATION = "0003_notify.sql"
DIALECT_NAMES = {"sqlite": "SQLite", "postgres": "PostgreSQL"}


def gap_note(dialect: Dialect, names: list[str]) -> list[str]:
    """The line that says why a dialect without ``0003_notify.sql`` (SQLite) has no 0003,
    when a listing goes from 0002 to 0004."""
    numbers = {name[:4] for name in names}
    shipped = {m.name for m in migrations(dialect)}
    if NOTIFY_MIGRATION in shipped or not {"0002", "0004"} <= numbers:
        return []
    return [
        f"(no 0003 on {DIALECT_NAMES.get(dialect, dialect)}: {NOTIFY_MIGRATION} adds "
        f"PostgreSQL's LISTEN/NOTIFY trigger, which it has no counterpart of)"
    ]
