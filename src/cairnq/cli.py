"""The ``cairnq`` command. Each command is a function of (arguments, output stream).

The database comes from ``--db URL``, else ``CAIRNQ_DATABASE_URL``, else
``./cairnq.db``; on PostgreSQL the schema from ``--schema``, else
``CAIRNQ_SCHEMA``. Only ``migrate``, ``submit`` and ``worker`` create or
migrate a database; every other command first checks, without writing, that
the database exists and holds cairnq's tables.
"""

from __future__ import annotations

import argparse
import asyncio
import importlib
import ipaddress
import json
import logging
import os
import re
import sqlite3
import sys
import time
from collections.abc import Iterator, Sequence
from contextlib import closing, contextmanager
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import TYPE_CHECKING, Any, NoReturn, TextIO
from urllib.parse import quote, urlsplit

from ._json import parse_input
from .backends import open_backend, sqlite_path_from_url
from .client import SyncCairnQ
from .durations import format_duration, parse_duration
from .errors import (
    CairnQError,
    DatabaseError,
    DatabaseUnavailable,
    InvalidArgument,
    SerializationError,
)
from .migrate import migrate
from .models import CONFLICTS, STATUSES, TERMINAL_STATUSES, Task
from .protocol import ops as _ops
from .protocol.setup import (
    Damage,
    SchemaObject,
    damage_error,
    describe_missing,
    find_damage,
    is_extension,
    newer_migrations,
    pending,
)
from .protocol.statements import Dialect, migrations, statements
from .top import format_table, percent, run_top

if TYPE_CHECKING:
    from .worker import Worker

DEFAULT_DB = "cairnq.db"
PURGE_BATCH = 1000
NO_TIME_LIMIT_MS = 2**62
CONNECT_TIMEOUT_S = 10
_CONNINFO = re.compile(r"^\s*[A-Za-z_]+\s*=")


class CommandError(Exception):
    """A command cannot do what was asked; ``main`` prints the message as one line."""

    def __init__(self, message: str, *, code: int = 1) -> None:
        super().__init__(message)
        self.code = code


# --- which database ------------------------------------------------------------------------


@dataclass(frozen=True)
class Target:
    """The database a command works on: a SQLite file, or a PostgreSQL URL and schema."""

    dialect: Dialect
    location: str
    schema: str | None = None

    def describe(self) -> str:
        """The database in words, without any password."""
        if self.dialect == "sqlite":
            return self.location
        parts = urlsplit(self.location)
        host = parts.hostname or "localhost"
        port = f":{parts.port}" if parts.port else ""
        where = f"PostgreSQL {host}{port}{parts.path or '/'}"
        return f"{where} (schema {self.schema})" if self.schema else where

    def backend_options(self, *, migrate: bool) -> dict[str, Any]:
        """Options for ``open_backend``: small pool, no LISTEN (a command is short-lived)."""
        if self.dialect == "sqlite":
            return {"migrate": migrate}
        return {
            "schema": self.schema,
            "migrate": migrate,
            "listen": False,
            "min_size": 1,
            "max_size": 2,
            "application_name": "cairnq-cli",
        }


def resolve_target(db: str | None, schema: str | None) -> Target:
    """The database named by ``--db`` / ``--schema``, falling back to the environment.

    Raises:
        InvalidArgument: an unknown URL scheme, a libpq ``key=value`` string, or
            ``--schema`` given for SQLite.
    """
    text = db or os.environ.get("CAIRNQ_DATABASE_URL") or DEFAULT_DB
    env_schema = os.environ.get("CAIRNQ_SCHEMA") or None
    scheme = urlsplit(text).scheme.lower() if "://" in text else ""
    if scheme in ("postgresql", "postgres"):
        from .backends.postgres import check_schema

        return Target("postgres", text, check_schema(schema or env_schema))
    if scheme and scheme != "sqlite":
        raise InvalidArgument(
            f"unsupported database URL scheme {scheme!r}: use sqlite:///path.db, "
            "a file path, or postgresql://user@host/db"
        )
    if not scheme and _CONNINFO.match(text):
        raise InvalidArgument(
            f"{text!r} looks like a libpq key=value string; "
            "give PostgreSQL as a URL: postgresql://user@host:5432/db"
        )
    if schema:
        raise InvalidArgument("--schema applies to PostgreSQL only")
    path = sqlite_path_from_url(text) if scheme else text
    return Target("sqlite", path)


# --- looking at a database without changing it ---------------------------------------------


@dataclass(frozen=True)
class Inspection:
    """What a database holds: ``applied`` maps migration file names to when they were applied.

    ``exists`` is false for a SQLite file that is not there; ``other_schemas``
    lists PostgreSQL schemas holding cairnq tables other than the target's;
    ``objects`` the cairnq_* tables, indexes, triggers and functions present.
    """

    exists: bool
    applied: dict[str, int] = field(default_factory=dict)
    other_schemas: tuple[str, ...] = ()
    objects: frozenset[SchemaObject] = frozenset()

    def damage(self, dialect: Dialect) -> list[Damage]:
        """Applied migrations whose tables, indexes or triggers are missing."""
        return find_damage(dialect, set(self.applied), self.objects) if self.applied else []


def inspect_database(target: Target) -> Inspection:
    """Read the migration ledger without creating, locking or migrating anything."""
    if target.dialect == "sqlite":
        return _inspect_sqlite(target.location)
    return _inspect_postgres(target)


def _ledger_sql(dialect: Dialect, name: str) -> str:
    return statements(dialect)[name].text


def _inspect_sqlite(path: str) -> Inspection:
    if not os.path.exists(path):
        return Inspection(exists=False)
    if os.path.isdir(path):
        raise CommandError(f"{path} is a directory, not a database file")
    uri = "file:" + quote(os.path.abspath(path)) + "?mode=ro"
    try:
        with closing(sqlite3.connect(uri, uri=True)) as conn:
            present = conn.execute(_ledger_sql("sqlite", "ledger_exists")).fetchone()[0]
            if not present:
                return Inspection(exists=True)
            rows = conn.execute(_ledger_sql("sqlite", "ledger_applied")).fetchall()
            objects = conn.execute(_ledger_sql("sqlite", "schema_objects")).fetchall()
    except sqlite3.OperationalError as exc:
        raise DatabaseUnavailable(f"cannot read SQLite database {path}: {exc}") from exc
    except sqlite3.DatabaseError as exc:
        raise CommandError(f"{path} is not a cairnq database ({exc})") from exc
    return Inspection(
        exists=True,
        applied={str(name): int(at) for name, at in rows},
        objects=frozenset((str(kind), str(name)) for kind, name in objects),
    )


def _inspect_postgres(target: Target) -> Inspection:
    import psycopg
    from psycopg import sql
    from psycopg.conninfo import conninfo_to_dict

    options: dict[str, Any] = {"autocommit": True}
    try:
        if "connect_timeout" not in conninfo_to_dict(target.location):
            options["connect_timeout"] = CONNECT_TIMEOUT_S
    except psycopg.ProgrammingError as exc:
        raise InvalidArgument(f"malformed PostgreSQL URL: {_one_line(exc)}") from exc
    try:
        conn = psycopg.connect(target.location, **options)
    except psycopg.Error as exc:
        raise DatabaseUnavailable(
            f"cannot connect to {target.describe()}: {_one_line(exc)}"
        ) from exc
    try:
        with conn:
            if target.schema is not None:
                conn.execute(sql.SQL("set search_path to {}").format(sql.Identifier(target.schema)))
            installations = conn.execute(_ledger_sql("postgres", "installations")).fetchall()
            current = installations[0][0] if installations else None
            others = tuple(sorted({str(s) for _, s in installations if s and s != current}))
            present = conn.execute(_ledger_sql("postgres", "ledger_exists")).fetchone()
            if not present or not present[0]:
                return Inspection(exists=True, other_schemas=others)
            rows = conn.execute(_ledger_sql("postgres", "ledger_applied")).fetchall()
            objects = conn.execute(_ledger_sql("postgres", "schema_objects")).fetchall()
    except psycopg.Error as exc:
        raise DatabaseError(f"reading {target.describe()} failed: {_one_line(exc)}") from exc
    return Inspection(
        exists=True,
        applied={str(name): int(at) for name, at in rows},
        other_schemas=others,
        objects=frozenset((str(kind), str(name)) for kind, name in objects),
    )


def _one_line(exc: BaseException) -> str:
    return "; ".join(line.strip() for line in str(exc).splitlines() if line.strip())


def require_cairnq(target: Target) -> None:
    """Refuse, with one clear line, a database that is missing or not fully migrated.

    Raises:
        CommandError: no SQLite file there, no cairnq tables, or protocol migrations pending.
        SchemaIncomplete: objects the ledger records as created are missing.
    """
    found = inspect_database(target)
    if not found.exists:
        raise CommandError(
            f"no database at {target.location} (give --db or CAIRNQ_DATABASE_URL, "
            "or create it with `cairnq migrate`)"
        )
    if not found.applied:
        hint = ""
        if found.other_schemas:
            shown = ", ".join(found.other_schemas[:3])
            more = ", ..." if len(found.other_schemas) > 3 else ""
            hint = f" (schemas with cairnq tables: {shown}{more}; pick one with --schema)"
        raise CommandError(
            f"{target.describe()} is not a cairnq database; run `cairnq migrate` first{hint}"
        )
    # A database another SDK created lacks only cairnq's extensions: still readable.
    missing = [m for m in pending(target.dialect, set(found.applied)) if not is_extension(m)]
    if missing:
        raise CommandError(
            f"{target.describe()} has {len(missing)} pending migration(s) "
            f"({', '.join(missing)}); run `cairnq migrate` first"
        )
    damage = found.damage(target.dialect)
    if damage:
        raise damage_error(damage, newer_migrations(target.dialect, found.applied))


def _target(args: argparse.Namespace) -> Target:
    return resolve_target(args.db, args.schema)


@contextmanager
def open_client(args: argparse.Namespace, *, create: bool = False) -> Iterator[SyncCairnQ]:
    """A client on the command's database; only ``create=True`` may create or migrate it."""
    target = _target(args)
    if not create:
        require_cairnq(target)
    backend = open_backend(target.location, **target.backend_options(migrate=create))
    client = SyncCairnQ(backend)
    client._owns_backend = True
    with client:
        yield client


# --- output ------------------------------------------------------------------------------


def _now_ms() -> int:
    return time.time_ns() // 1_000_000


def _json(value: Any, *, indent: int | None = None) -> str:
    separators = None if indent else (",", ":")
    return json.dumps(value, ensure_ascii=False, indent=indent, separators=separators)


def _summary(task: Task) -> str:
    """``<id> <status>`` plus what a person wants to know about that status."""
    line = f"{task.id} {task.status}"
    if task.is_running and task.cancel_requested:
        line += " (cancel requested; the handler stops at its next check)"
    elif task.is_queued and task.attempt:
        line += f" (attempt {task.attempt}/{task.max_attempts} done)"
    return line


def _outcome_line(task: Task) -> str | None:
    if task.is_succeeded:
        return "result: " + _json(task.result)
    if task.is_failed:
        error = task.error or {}
        kind, code = error.get("type", "?"), error.get("code", "?")
        return f"error: {kind} [{code}]: {error.get('message', '')}"
    return None


def _write_lines(out: TextIO, lines: Sequence[str]) -> None:
    out.write("".join(line + "\n" for line in lines))


def _iso(ms: int) -> str:
    return datetime.fromtimestamp(ms / 1000, tz=timezone.utc).strftime("%Y-%m-%d %H:%M:%SZ")


# --- commands ----------------------------------------------------------------------------


def _cmd_demo(args: argparse.Namespace, out: TextIO) -> int:
    from .demo import run_demo

    return asyncio.run(run_demo(args.path, out))


def _database(args: argparse.Namespace) -> str:
    return str(args.db or os.environ.get("CAIRNQ_DATABASE_URL") or DEFAULT_DB)


def _cmd_conformance(args: argparse.Namespace, out: TextIO) -> int:
    from .conformance import run_paths

    results = run_paths(args.paths, _database(args), real_clock=args.real_clock, out=out)
    return 0 if results and all(r.passed for r in results) else 1


def _cmd_migrate(args: argparse.Namespace, out: TextIO) -> int:
    target = _target(args)
    if args.status:
        _write_lines(out, _migration_status(target))
        return 0
    found = inspect_database(target)
    damage = found.damage(target.dialect)
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
        _write_lines(out, lines)
        return 0
    options = target.backend_options(migrate=True)
    applied = migrate(target.location, repair=args.repair, **options)
    if applied:
        _write_lines(
            out,
            [f"applied again  {n}" if n in found.applied else f"applied  {n}" for n in applied],
        )
    else:
        out.write(f"nothing to apply: {target.describe()} is up to date\n")
    return 0


def _migration_status(target: Target) -> list[str]:
    """``applied``, ``damaged`` (with what is missing) or ``pending``, one line per migration;
    a last line says how to repair when something is damaged."""
    found = inspect_database(target)
    damage = {d.migration: d for d in found.damage(target.dialect)}
    lines = []
    # File-name order is migration order; the ledger may also name files this version lacks.
    for name in sorted({m.name for m in migrations(target.dialect)} | set(found.applied)):
        if name not in found.applied:
            lines.append(f"pending  {name}")
        elif name in damage:
            missing = describe_missing(damage[name].missing)
            lines.append(f"damaged  {name}  {_iso(found.applied[name])}  missing {missing}")
        else:
            lines.append(f"applied  {name}  {_iso(found.applied[name])}")
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


def _read_payload(text: str | None) -> Any:
    if text is None:
        return None
    if text == "-":
        # JSON is UTF-8 whatever the locale: read bytes where stdin has them.
        raw = getattr(sys.stdin, "buffer", None)
        try:
            text = raw.read().decode("utf-8") if raw is not None else sys.stdin.read()
        except UnicodeDecodeError:
            raise SerializationError("payload on stdin is not valid UTF-8") from None
    return parse_input(text, what="payload")


def _cmd_submit(args: argparse.Namespace, out: TextIO) -> int:
    if args.timeout_ms is not None and not args.wait:
        raise CommandError("--timeout-ms only applies with --wait", code=2)
    payload = _read_payload(args.payload)
    with open_client(args, create=True) as client:
        task = client.submit(
            args.name,
            payload,
            key=args.key,
            conflict=args.conflict,
            queue=args.queue,
            priority=args.priority,
            delay_ms=args.delay_ms,
            max_attempts=args.max_attempts,
        )
        if args.wait:
            limit = NO_TIME_LIMIT_MS if args.timeout_ms is None else args.timeout_ms
            task = client.wait(task.id, timeout_ms=limit)
    if args.json:
        out.write(_json(task.to_dict(), indent=2) + "\n")
    else:
        outcome = _outcome_line(task) if args.wait else None
        _write_lines(out, [_summary(task)] + ([outcome] if outcome else []))
    return 1 if args.wait and not task.is_succeeded else 0


def _cmd_get(args: argparse.Namespace, out: TextIO) -> int:
    with open_client(args) as client:
        task = client.get(args.id) if args.key is None else client.get_by_key(args.key)
    if task is None:
        raise CommandError(_unknown(args))
    out.write(_json(task.to_dict(), indent=2) + "\n")
    return 0


def _unknown(args: argparse.Namespace) -> str:
    return f"no task with id {args.id}" if args.key is None else f"no task with key {args.key!r}"


def _cmd_ls(args: argparse.Namespace, out: TextIO) -> int:
    with open_client(args) as client:
        tasks = client.list(status=args.status, queue=args.queue, name=args.name, limit=args.limit)
    if args.json:
        out.write(_json([t.to_dict() for t in tasks], indent=2) + "\n")
    elif args.jsonl:
        _write_lines(out, [_json(t.to_dict()) for t in tasks])
    elif not tasks:
        out.write("no tasks\n")
    else:
        now = _now_ms()
        rows = [
            [
                t.id,
                t.name,
                t.queue,
                t.status,
                f"{t.attempt}/{t.max_attempts}",
                percent(t.progress),
                format_duration(now - t.created_at_ms),
            ]
            for t in tasks
        ]
        headers = ["ID", "NAME", "QUEUE", "STATUS", "ATTEMPT", "PROGRESS", "AGE"]
        _write_lines(out, format_table(headers, rows, right=(4, 5, 6)))
    return 0


def _cmd_cancel(args: argparse.Namespace, out: TextIO) -> int:
    with open_client(args) as client:
        if args.key is None:
            task = client.cancel(args.id)
            current = None if task else client.get(args.id)
        else:
            task = client.cancel_by_key(args.key)
            current = None if task else client.get_by_key(args.key)
    if task is None:
        if current is None:
            raise CommandError(_unknown(args))
        raise CommandError(f"task {current.id} is already {current.status}; nothing to cancel")
    out.write(_summary(task) + "\n")
    return 0


def _cmd_retry(args: argparse.Namespace, out: TextIO) -> int:
    reset = args.reset_attempt
    with open_client(args) as client:
        if args.key is None:
            task = client.retry(args.id, reset_attempt=reset)
            current = None if task else client.get(args.id)
        else:
            task = client.retry_by_key(args.key, reset_attempt=reset)
            current = None if task else client.get_by_key(args.key)
    if task is None:
        if current is None:
            raise CommandError(_unknown(args))
        raise CommandError(
            f"task {current.id} is {current.status}; only failed or canceled tasks can be retried"
        )
    out.write(f"{task.id} {task.status} (attempt {task.attempt}/{task.max_attempts})\n")
    return 0


def _cmd_purge(args: argparse.Namespace, out: TextIO) -> int:
    total = 0
    with open_client(args) as client:
        while True:
            ids = client.purge(
                older_than_ms=args.older_than,
                status=args.status,
                queue=args.queue,
                name=args.name,
                limit=args.batch,
            )
            total += len(ids)
            if len(ids) < args.batch:
                break
    out.write(f"purged {total} task{'' if total == 1 else 's'}\n")
    return 0


def _cmd_stats(args: argparse.Namespace, out: TextIO) -> int:
    with open_client(args) as client:
        counts = client.stats(args.queue)
    if args.json:
        out.write(_json(counts, indent=2) + "\n")
        return 0
    if not counts:
        out.write("no tasks\n")
        return 0
    headers = ["QUEUE", *(s.upper() for s in STATUSES), "TOTAL"]
    rows = [
        [queue, *(str(c.get(s, 0)) for s in STATUSES), str(sum(c.values()))]
        for queue, c in sorted(counts.items())
    ]
    _write_lines(out, format_table(headers, rows, right=range(1, len(headers))))
    return 0


def _cmd_top(args: argparse.Namespace, out: TextIO) -> int:
    target = _target(args)
    with open_client(args) as client:
        try:
            run_top(
                client,
                out,
                interval=args.interval,
                queue=args.queue,
                title=target.describe(),
                refreshes=args.iterations,
            )
        except KeyboardInterrupt:
            out.write("\n")
    return 0


DASHBOARD_PORT = 8181


def is_loopback(host: str) -> bool:
    """Whether binding ``host`` keeps a server reachable from this machine only."""
    if host.lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def _cmd_dashboard(args: argparse.Namespace, out: TextIO) -> int:
    token = args.token or os.environ.get("CAIRNQ_DASHBOARD_TOKEN") or None
    if token is None and not is_loopback(args.host):
        raise CommandError(
            f"refusing to serve the dashboard on {args.host} without a token: "
            "give --token or CAIRNQ_DASHBOARD_TOKEN, or bind to 127.0.0.1"
        )
    try:
        import uvicorn
    except ImportError:
        raise CommandError(
            'the dashboard needs uvicorn: pip install ".[dashboard]" (or pip install uvicorn)'
        ) from None
    from .client import CairnQ
    from .dashboard import create_app
    from .dashboard._app import parse_forwarded_allow_ips

    parse_forwarded_allow_ips(args.forwarded_allow_ips)
    target = _target(args)
    require_cairnq(target)
    options = target.backend_options(migrate=False)
    if target.dialect == "postgres":
        options.update(max_size=4, application_name="cairnq-dashboard")
    client = CairnQ(open_backend(target.location, **options))
    client._owns_backend = True
    # Without a token, only loopback names may reach it: a site rebinding its own
    # name to 127.0.0.1 would otherwise be same-origin with the dashboard.
    hosts = None if token is not None else ("localhost", "127.0.0.1", "::1", args.host.strip("[]"))
    app = create_app(
        client,
        read_only=args.read_only,
        token=token,
        allowed_hosts=hosts,
        forwarded_allow_ips=args.forwarded_allow_ips,
    )
    # The command made the client, so the app closes it when the server stops.
    app.owns_client = True
    host = f"[{args.host}]" if ":" in args.host else args.host
    notes = [target.describe()]
    if args.read_only:
        notes.append("read-only")
    if token:
        notes.append("token required: open /?token=... once")
    out.write(
        f"cairnq dashboard on http://{host}:{args.port}/ ({'; '.join(notes)}); Ctrl-C to stop\n"
    )
    out.flush()
    # The app believes forwarded headers only from --forwarded-allow-ips; uvicorn's own
    # handling would trust 127.0.0.1 by default and replace the peer address it checks.
    uvicorn.run(
        app,
        host=args.host,
        port=args.port,
        log_level="warning",
        access_log=False,
        lifespan="on",
        proxy_headers=False,
    )
    return 0


def load_worker(spec: str) -> Worker:
    """Import ``MODULE:ATTR`` (``ATTR`` defaults to ``worker``) and return that ``Worker``.

    The current directory goes first on ``sys.path``, as with ``python -m``.

    Raises:
        CommandError: the spec is malformed, the import fails, or ATTR is no Worker.
    """
    from .worker import Worker

    module_name, _, attr = spec.partition(":")
    attr = attr or "worker"
    if not all(p.isidentifier() for p in [*module_name.split("."), *attr.split(".")]):
        raise CommandError(f"invalid worker {spec!r}: use MODULE:ATTR, e.g. app.tasks:worker")
    cwd = os.getcwd()
    if cwd not in sys.path:
        sys.path.insert(0, cwd)
    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError as exc:
        if exc.name and (module_name + ".").startswith(exc.name + "."):
            raise CommandError(
                f"no module named {exc.name!r} (looked in {cwd} and sys.path)"
            ) from exc
        raise CommandError(f"importing {module_name!r} failed: {exc}") from exc
    except Exception as exc:
        raise CommandError(
            f"importing {module_name!r} failed: {type(exc).__name__}: {exc}"
        ) from exc
    value: Any = module
    for part in attr.split("."):
        if not hasattr(value, part):
            raise CommandError(f"module {module_name!r} has no attribute {attr!r}")
        value = getattr(value, part)
    if not isinstance(value, Worker):
        raise CommandError(f"{module_name}:{attr} is a {type(value).__name__}, not a cairnq Worker")
    return value


def _cmd_worker(args: argparse.Namespace, out: TextIO) -> int:
    worker = load_worker(args.target)
    if args.queues is not None:
        names = [q.strip() for q in args.queues.split(",") if q.strip()]
        if not names:
            raise CommandError("--queues needs at least one queue name", code=2)
        worker.queues = _ops.check_names(names, "queues")
    if args.concurrency is not None:
        worker.concurrency = _ops.check_int(args.concurrency, "concurrency", low=1, high=100_000)
    if not logging.getLogger().handlers:
        logging.basicConfig(
            level=args.log_level.upper(),
            stream=sys.stderr,
            format="%(asctime)s %(levelname)s %(name)s: %(message)s",
        )
    out.write(
        f"cairnq worker {worker.worker_id}: queues {','.join(worker.queues)}, "
        f"concurrency {worker.concurrency}; Ctrl-C to stop\n"
    )
    out.flush()
    worker.serve(until_idle=args.until_idle)
    out.write(f"cairnq worker {worker.worker_id}: stopped\n")
    return 0


# --- argument parsing ----------------------------------------------------------------------


class _Help(argparse.HelpFormatter):
    """Wraps descriptions as usual, but keeps an ``example:`` epilog on one line."""

    def _fill_text(self, text: str, width: int, indent: str) -> str:
        if text.startswith("example: "):
            return indent + text
        return super()._fill_text(text, width, indent)


class _Parser(argparse.ArgumentParser):
    """Usage errors as one line: ``cairnq: error: ...`` and exit code 2."""

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"cairnq: error: {message} (see `{self.prog} --help`)\n")


def _duration(text: str) -> int:
    try:
        return parse_duration(text)
    except InvalidArgument as exc:
        raise argparse.ArgumentTypeError(str(exc)) from exc


def _count(low: int) -> Any:
    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
        if value < low:
            raise argparse.ArgumentTypeError(f"{text!r} must be at least {low}")
        return value

    return parse


def _port(text: str) -> int:
    value: int = _count(1)(text)
    if value > 65535:
        raise argparse.ArgumentTypeError(f"{text!r} is not a port (1-65535)")
    return value


def _interval(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of seconds") from None
    if not 0 < value < 86_400:
        raise argparse.ArgumentTypeError(f"{text!r} must be between 0 and 86400 seconds")
    return value


def _common() -> _Parser:
    common = _Parser(add_help=False)
    _database_options(common, default=argparse.SUPPRESS)
    return common


def _database_options(parser: argparse.ArgumentParser, *, default: Any) -> None:
    # The same options before and after the command name; SUPPRESS keeps a command's
    # parser from overwriting what was given before it.
    parser.add_argument(
        "--db",
        metavar="URL",
        default=default,
        help="sqlite:///path.db, a file path, or postgresql://user@host/db "
        f"(default: $CAIRNQ_DATABASE_URL, else ./{DEFAULT_DB})",
    )
    parser.add_argument(
        "--schema",
        default=default,
        help="PostgreSQL schema of cairnq's tables (default: $CAIRNQ_SCHEMA)",
    )
    parser.add_argument(
        "--debug",
        action="store_true",
        default=False if default is None else default,
        help="show tracebacks on errors",
    )


def _by_id_or_key(parser: argparse.ArgumentParser) -> None:
    which = parser.add_mutually_exclusive_group(required=True)
    which.add_argument("id", nargs="?", help="task id")
    which.add_argument("--key", help="the idempotency key pointing at the task")


def _parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="cairnq",
        description="A durable task runtime on SQLite and PostgreSQL.",
        epilog="example: cairnq --db sqlite:///tasks.db ls --status failed",
        formatter_class=_Help,
    )
    _database_options(parser, default=None)
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    common = [_common()]

    def command(
        name: str, summary: str, example: str, description: str = ""
    ) -> argparse.ArgumentParser:
        return commands.add_parser(
            name,
            help=summary,
            description=description or summary[0].upper() + summary[1:] + ".",
            epilog=f"example: {example}",
            parents=common,
            formatter_class=_Help,
        )

    migrate_cmd = command(
        "migrate",
        "create the database or bring it to the current schema",
        "cairnq migrate --db postgresql://app@db/app --schema jobs",
        "Apply pending migrations (creating a SQLite file if needed). A database whose "
        "ledger records migrations whose objects are missing is refused unless --repair "
        "is given. --dry-run and --status only read.",
    )
    mode = migrate_cmd.add_mutually_exclusive_group()
    mode.add_argument("--dry-run", action="store_true", help="print what would be applied")
    mode.add_argument(
        "--status", action="store_true", help="list applied, damaged and pending migrations"
    )
    migrate_cmd.add_argument(
        "--repair",
        action="store_true",
        help="when the ledger records migrations whose tables, indexes or triggers are "
        "missing, apply the earliest of them and every later one again",
    )
    migrate_cmd.set_defaults(run=_cmd_migrate)

    worker = command(
        "worker",
        "run a Worker from your code until SIGINT or SIGTERM",
        "cairnq worker app.tasks:worker --queues emails,default --concurrency 8",
        "Import MODULE:ATTR (a cairnq Worker; ATTR defaults to `worker`) from the "
        "current directory or sys.path and serve it. The first signal drains "
        "in-flight tasks; a second stops at once. The database is the Worker's own.",
    )
    worker.add_argument("target", metavar="MODULE:ATTR", help="where the Worker is")
    worker.add_argument("--queues", help="comma-separated queues, instead of the Worker's")
    worker.add_argument("--concurrency", type=_count(1), help="handler calls at once")
    worker.add_argument(
        "--until-idle",
        action="store_true",
        help="exit once no task is due and none runs (a batch run; delayed tasks stay queued)",
    )
    worker.add_argument(
        "--log-level",
        default="info",
        choices=["debug", "info", "warning", "error"],
        help="logging level when nothing configured logging (info)",
    )
    worker.set_defaults(run=_cmd_worker)

    submit = command(
        "submit",
        "enqueue a task",
        """cairnq submit email.send '{"to": "ada@example.com"}' --key welcome:ada --wait""",
        "Enqueue a task and print its id and status. With --wait, wait for it to "
        "finish and print the outcome; exits 1 unless it succeeded.",
    )
    submit.add_argument("name", help="task (handler) name")
    submit.add_argument("payload", nargs="?", metavar="PAYLOAD_JSON", help="JSON; - reads stdin")
    submit.add_argument("--key", help="idempotency key")
    submit.add_argument(
        "--conflict", choices=CONFLICTS, default="reuse", help="when the key is taken (reuse)"
    )
    submit.add_argument("--queue", help="queue (default)")
    submit.add_argument("--priority", type=int, help="higher runs first (0)")
    submit.add_argument("--delay-ms", type=_count(0), default=0, help="earliest start, from now")
    submit.add_argument("--max-attempts", type=_count(1), help="runs allowed (3)")
    submit.add_argument("--wait", action="store_true", help="wait until the task finishes")
    submit.add_argument(
        "--timeout-ms", type=_count(0), help="with --wait: give up after this long (no limit)"
    )
    submit.add_argument("--json", action="store_true", help="print the whole task as JSON")
    submit.set_defaults(run=_cmd_submit)

    get = command("get", "print a task as JSON", "cairnq get --key welcome:ada")
    _by_id_or_key(get)
    get.set_defaults(run=_cmd_get)

    ls = command(
        "ls", "list tasks, newest first", "cairnq ls --status failed --queue emails --limit 20"
    )
    ls.add_argument("--status", choices=STATUSES)
    ls.add_argument("--queue")
    ls.add_argument("--name", help="task name")
    ls.add_argument("--limit", type=_count(0), default=100, help="most tasks listed (100)")
    form = ls.add_mutually_exclusive_group()
    form.add_argument("--json", action="store_true", help="print a JSON array")
    form.add_argument("--jsonl", action="store_true", help="print one JSON object per line")
    ls.set_defaults(run=_cmd_ls)

    cancel = command(
        "cancel",
        "cancel a task (a running one stops cooperatively)",
        "cairnq cancel task_01JD0000000000000000000000",
    )
    _by_id_or_key(cancel)
    cancel.set_defaults(run=_cmd_cancel)

    retry = command(
        "retry",
        "queue a failed or canceled task again",
        "cairnq retry --key welcome:ada --reset-attempt",
    )
    _by_id_or_key(retry)
    retry.add_argument("--reset-attempt", action="store_true", help="start counting at 0 again")
    retry.set_defaults(run=_cmd_retry)

    purge = command(
        "purge",
        "delete finished tasks older than a duration",
        "cairnq purge --older-than 7d --status succeeded",
        "Delete finished (succeeded, failed, canceled) tasks completed longer ago than "
        "--older-than, in batches until none is left; print how many.",
    )
    purge.add_argument(
        "--older-than",
        type=_duration,
        required=True,
        metavar="DURATION",
        help="7d, 12h, 30m, 45s, 500ms, or combined: 1h30m",
    )
    purge.add_argument("--status", choices=sorted(TERMINAL_STATUSES))
    purge.add_argument("--queue")
    purge.add_argument("--name", help="task name")
    purge.add_argument(
        "--batch", type=_count(1), default=PURGE_BATCH, help=f"rows per transaction ({PURGE_BATCH})"
    )
    purge.set_defaults(run=_cmd_purge)

    stats = command("stats", "count tasks by queue and status", "cairnq stats --queue emails")
    stats.add_argument("--queue")
    stats.add_argument("--json", action="store_true", help="print JSON")
    stats.set_defaults(run=_cmd_stats)

    top = command(
        "top",
        "live view of queues and running tasks",
        "cairnq top --interval 1 --queue emails",
        "Refresh until Ctrl-C: per queue the task counts by status and the tasks "
        "finished per second since the last refresh; then the running tasks with "
        "progress, message, worker and age.",
    )
    top.add_argument("--interval", type=_interval, default=2.0, help="seconds between refreshes")
    top.add_argument("--queue", help="show only this queue")
    top.add_argument("-n", "--iterations", type=_count(1), help="stop after this many refreshes")
    top.set_defaults(run=_cmd_top)

    dashboard = command(
        "dashboard",
        "serve the web dashboard: queues, tasks, workers, actions",
        "cairnq dashboard --db postgresql://app@db/app --host 0.0.0.0 --token $TOKEN",
        "Serve the dashboard (needs the dashboard extra: uvicorn). It binds to "
        "127.0.0.1 unless told otherwise; any other address needs a token "
        "(--token or CAIRNQ_DASHBOARD_TOKEN), which every request must then carry: "
        "open the page once with ?token=..., or send Authorization: Bearer.",
    )
    dashboard.add_argument("--host", default="127.0.0.1", help="address to bind (127.0.0.1)")
    dashboard.add_argument(
        "--port", type=_port, default=DASHBOARD_PORT, help=f"port ({DASHBOARD_PORT})"
    )
    dashboard.add_argument(
        "--read-only", action="store_true", help="hide and refuse cancel, retry and purge"
    )
    dashboard.add_argument(
        "--token", help="access token required on every request (default: $CAIRNQ_DASHBOARD_TOKEN)"
    )
    dashboard.add_argument(
        "--forwarded-allow-ips",
        metavar="IPS",
        help="comma-separated addresses or networks of reverse proxies whose X-Forwarded-Host "
        "and X-Forwarded-Proto to believe, or '*' (default: none)",
    )
    dashboard.set_defaults(run=_cmd_dashboard)

    demo = commands.add_parser(
        "demo",
        help="run sample tasks through a worker on a local SQLite file",
        description="Submit sample tasks, run a worker on them with live progress, "
        "and print a summary. Exits 0 when every task succeeded.",
        epilog="example: cairnq demo --path /tmp/demo.db",
    )
    demo.add_argument("--path", default="cairnq-demo.db", help="SQLite file (cairnq-demo.db)")
    demo.set_defaults(run=_cmd_demo)

    conformance = commands.add_parser(
        "conformance",
        help="run protocol scenario files against a backend",
        description="Run conformance scenarios (JSON). Each scenario gets a fresh store: a "
        "temporary SQLite file, or a throwaway schema in the PostgreSQL database given.",
        epilog="example: cairnq conformance scenarios/ --db postgresql://localhost/test",
    )
    conformance.add_argument("paths", nargs="+", help="scenario files or directories")
    conformance.add_argument(
        "--db", default=argparse.SUPPRESS, help="database URL (picks the backend)"
    )
    conformance.add_argument(
        "--real-clock", action="store_true", help="really sleep in sleep steps"
    )
    conformance.set_defaults(run=_cmd_conformance)
    return parser


def main(argv: Sequence[str] | None = None, out: TextIO | None = None) -> int:
    """Run the command line; returns the exit code.

    Errors print one line to stderr (a traceback only with ``--debug``).
    """
    out = out or sys.stdout
    parser = _parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:
        return int(exc.code or 0)
    try:
        code: int = args.run(args, out)
    except (CommandError, CairnQError, OSError, ImportError) as exc:
        if args.debug:
            raise
        sys.stderr.write(f"cairnq: error: {_one_line(exc)}\n")
        return exc.code if isinstance(exc, CommandError) else 1
    except KeyboardInterrupt:
        return 130
    return code


def console() -> None:  # pragma: no cover - the installed script
    sys.exit(main())
