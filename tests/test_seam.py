"""The backend seam: capabilities checked by type, backends opened by URL scheme, one door.

Above ``src/cairnq/backends/`` nothing imports a backend module or a database
driver, probes a backend with ``getattr``, or branches on a dialect's name.
"""

from __future__ import annotations

import ast
import asyncio
import contextlib
import io
import secrets
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import cairnq
from cairnq import CairnQ, SyncCairnQ, TaskContext, Worker
from cairnq._clock import Clock
from cairnq.backends import (
    Backend,
    Clocked,
    Described,
    FileBound,
    Inspector,
    InTransactionCompleter,
    Migrating,
    Opening,
    ReservedRunner,
    SQLiteBackend,
    TransactionalRunner,
    clock_of,
    description_of,
    label_of,
    migration_settings,
    open_backend,
    opening,
    register_backend,
    register_opening,
)
from cairnq.cli import main
from cairnq.conformance import factory_for, run_paths
from cairnq.errors import InvalidArgument, UnsupportedBackend
from cairnq.kernel.setup import find_damage
from cairnq.protocol.statements import Dialect
from cairnq.protocol.steps import Op, Setup

from ._db import Database

SCENARIOS = Path(cairnq.__file__).parent / "drivertest" / "scenarios"

SRC = Path(cairnq.__file__).parent
BACKENDS = SRC / "backends"
# Modules of the backends package anyone may import: the seam and the registry.
SEAM_MODULES = {"__init__", "base", "_registry"}
DRIVERS = {"sqlite3", "psycopg", "psycopg_pool"}

CAPABILITIES: list[type] = [
    Clocked,
    Described,
    Migrating,
    TransactionalRunner,
    ReservedRunner,
    InTransactionCompleter,
    FileBound,
    Inspector,
]
CLAIMS: dict[str, set[type]] = {
    "sqlite": {Clocked, Described, Migrating, TransactionalRunner, FileBound, Inspector},
    "postgres": {
        Clocked,
        Described,
        Migrating,
        TransactionalRunner,
        ReservedRunner,
        InTransactionCompleter,
        Inspector,
    },
}


class BareBackend:
    """A third backend with no optional capability: the seam's ``Backend`` and nothing more.

    It runs every operation on a real SQLite database.
    """

    def __init__(self, inner: Backend) -> None:
        self._inner = inner
        self.dialect = inner.dialect
        self.hub = inner.hub

    def open(self) -> None:
        self._inner.open()

    async def aopen(self) -> None:
        await self._inner.aopen()

    def run(self, op: Op[Any], *, write: bool) -> Any:
        return self._inner.run(op, write=write)

    async def arun(self, op: Op[Any], *, write: bool) -> Any:
        return await self._inner.arun(op, write=write)

    def close(self) -> None:
        self._inner.close()

    async def aclose(self) -> None:
        await self._inner.aclose()


# --- capabilities ------------------------------------------------------------------------


def test_a_backend_is_a_backend_with_exactly_the_capabilities_it_claims(db: Database) -> None:
    backend = db.backend()
    assert isinstance(backend, Backend)
    assert {c for c in CAPABILITIES if isinstance(backend, c)} == CLAIMS[db.kind]


def test_a_sqlite_backend_is_labelled_by_its_file_and_described_by_its_path(
    tmp_path: Path,
) -> None:
    backend = open_backend(f"sqlite:///{tmp_path}/q.db")
    assert (backend.label, backend.description) == ("SQLite q.db", f"{tmp_path}/q.db")


def test_a_postgres_backend_is_labelled_by_its_schema_and_described_without_the_password() -> None:
    pytest.importorskip("psycopg")
    backend = open_backend("postgresql://app:s3cret@db:5433/app", schema="jobs")
    assert (backend.label, backend.description) == (
        "PostgreSQL · jobs",
        "PostgreSQL db:5433/app (schema jobs)",
    )


def test_a_backend_opens_with_the_opening_registered_with_the_backends(db: Database) -> None:
    registered = opening()
    seen: list[str] = []

    def setup(dialect: Dialect, **options: Any) -> Setup:
        seen.append(dialect)
        return registered.setup(dialect, **options)

    register_opening(Opening(setup, registered.installation_check))
    try:
        db.backend().open()
    finally:
        register_opening(registered)
    assert seen == [db.kind]


def test_inspecting_reads_the_ledger_without_opening_the_backend(db: Database) -> None:
    db.backend().open()
    fresh = db.backend()
    assert isinstance(fresh, Inspector)
    found = fresh.inspect()
    assert (
        found.exists
        and found.applied
        and not find_damage(fresh.dialect, found.applied, found.objects)
    )


def test_a_backend_with_no_capabilities_is_still_a_backend(sqlite_db: Database) -> None:
    bare = BareBackend(sqlite_db.backend())
    assert isinstance(bare, Backend)
    assert not [c for c in CAPABILITIES if isinstance(bare, c)]


def test_submit_with_a_connection_is_refused_without_a_transactional_runner(
    sqlite_db: Database,
) -> None:
    with (
        SyncCairnQ(BareBackend(sqlite_db.backend())) as cq,
        pytest.raises(UnsupportedBackend, match="has no shared connection"),
    ):
        cq.submit("job", {}, conn=object())


def test_succeed_in_is_refused_without_an_in_transaction_completer(sqlite_db: Database) -> None:
    async def scenario() -> Any:
        client = CairnQ(BareBackend(sqlite_db.backend()))
        client._owns_backend = True
        worker = Worker(client, poll_interval_ms=20)

        @worker.task
        async def settle(ctx: TaskContext, payload: Any) -> str:
            try:
                await ctx.succeed_in(lambda conn: asyncio.sleep(0))
            except UnsupportedBackend as exc:
                return str(exc)
            return "settled"

        async with worker.background():
            task = await client.submit("settle", {})
            done = await client.wait(task.id, timeout_ms=10_000)
        await worker.close()
        await client.close()
        return done.result

    result = asyncio.run(scenario())
    assert result == (
        "succeed_in needs PostgreSQL: sqlite cannot share a transaction "
        "between the handler's writes and the task's completion"
    )


@pytest.mark.fresh_schema
def test_migrate_runs_through_the_seam_on_a_backend_with_no_capabilities(
    sqlite_db: Database,
) -> None:
    inner = sqlite_db.backend()
    bare = BareBackend(inner)
    applied = cairnq.migrate(bare)
    bare.close()
    assert applied == [] and inner.migrations_applied


def test_a_backend_without_the_optional_members_gets_their_defaults(sqlite_db: Database) -> None:
    bare = BareBackend(sqlite_db.backend())
    assert (clock_of(bare), label_of(bare), description_of(bare), migration_settings(bare)) == (
        None,
        "sqlite",
        "a sqlite database",
        (True, False, []),
    )


# --- the registry ------------------------------------------------------------------------


def test_open_backend_opens_a_registered_scheme_with_its_opener(tmp_path: Path) -> None:
    scheme = f"bare{secrets.token_hex(3)}"
    path = tmp_path / "bare.db"
    register_backend(
        [scheme], lambda url, **options: BareBackend(SQLiteBackend(path)), dialect="sqlite"
    )
    backend = open_backend(f"{scheme.upper()}://anything")
    assert isinstance(backend, BareBackend)


def test_open_backend_refuses_an_unregistered_scheme() -> None:
    with pytest.raises(InvalidArgument, match="unsupported database URL scheme 'nosuchdb'"):
        open_backend("nosuchdb://host/db")


def test_register_backend_refuses_a_scheme_that_is_not_lower_case() -> None:
    with pytest.raises(InvalidArgument, match="lower-case"):
        register_backend(["MyDB"], lambda url, **options: None, dialect="sqlite")


def test_conformance_runs_each_scenario_on_the_registered_scratch_database(
    tmp_path: Path,
) -> None:
    scheme = f"bare{secrets.token_hex(3)}"
    opened: list[str] = []

    @contextlib.contextmanager
    def scratch(url: str, clock: Clock | None) -> Iterator[Backend]:
        opened.append(url)
        backend = SQLiteBackend(tmp_path / f"scratch{len(opened)}.db", clock=clock)
        try:
            yield backend
        finally:
            backend.close()

    register_backend(
        [scheme],
        lambda url, **options: SQLiteBackend(tmp_path / "x.db"),
        dialect="sqlite",
        scratch=scratch,
    )
    results = run_paths([SCENARIOS / "basic_submit_get.json"], f"{scheme}://db", out=io.StringIO())
    assert [r.passed for r in results] == [True]
    assert opened == [f"{scheme}://db"]


def test_conformance_refuses_a_backend_without_scratch_databases() -> None:
    scheme = f"bare{secrets.token_hex(3)}"
    register_backend([scheme], lambda url, **options: None, dialect="sqlite")
    with pytest.raises(InvalidArgument, match="offers no scratch database"):
        factory_for(f"{scheme}://db")


def test_the_command_line_refuses_a_database_it_cannot_inspect(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    scheme = f"bare{secrets.token_hex(3)}"
    path = tmp_path / "bare.db"
    register_backend(
        [scheme], lambda url, **options: BareBackend(SQLiteBackend(path)), dialect="sqlite"
    )
    code = main(["stats", "--db", f"{scheme}://x"])
    assert code == 1
    assert capsys.readouterr().err == (
        "cairnq: error: the sqlite backend cannot be inspected; "
        "the command line needs a backend with inspect()\n"
    )


# --- the seam is the only door -----------------------------------------------------------


def module_name(path: Path) -> str:
    parts = path.relative_to(SRC.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def backend_modules() -> set[str]:
    return {p.stem for p in BACKENDS.glob("*.py")} - SEAM_MODULES


def imported_modules(tree: ast.Module, module: str, *, package: bool) -> list[tuple[int, str]]:
    """Every module an import statement names, relative imports resolved, with its line.

    ``from package import name`` yields ``package.name`` too: the name may be a module.
    """
    found: list[tuple[int, str]] = []
    here = module.split(".") if package else module.split(".")[:-1]
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.extend((node.lineno, alias.name) for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = here[: len(here) - node.level + 1] if node.level else []
            target = ".".join([*base, *(node.module.split(".") if node.module else [])])
            found.append((node.lineno, target))
            found.extend((node.lineno, f"{target}.{alias.name}") for alias in node.names)
    return found


def door_violations(source: str, module: str, *, package: bool = False) -> list[str]:
    """Imports of a backend module or a driver, ``getattr``/``hasattr`` on a backend,
    and comparisons with a dialect's name, in the module ``module`` holding ``source``."""
    tree = ast.parse(source)
    forbidden = {f"cairnq.backends.{name}" for name in backend_modules()}
    problems = []
    for line, name in imported_modules(tree, module, package=package):
        driver = name.split(".")[0]
        if driver in DRIVERS:
            problems.append(f"{module}:{line} imports the driver {driver}")
        for reached in forbidden:
            if name == reached or name.startswith(reached + "."):
                problems.append(f"{module}:{line} imports the backend module {reached}")
    for node in ast.walk(tree):
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Name)
            and node.func.id in ("getattr", "hasattr")
            and node.args
            and "backend" in ast.unparse(node.args[0])
        ):
            problems.append(f"{module}:{node.lineno} probes a backend: {ast.unparse(node)}")
        if isinstance(node, ast.Compare):
            sides = [node.left, *node.comparators]
            names_dialect = any(ast.unparse(s).split(".")[-1] == "dialect" for s in sides)
            literal = any(isinstance(s, ast.Constant) and isinstance(s.value, str) for s in sides)
            if names_dialect and literal:
                problems.append(
                    f"{module}:{node.lineno} branches on a dialect: {ast.unparse(node)}"
                )
    # One import statement can name a module twice (``from m import n`` gives m and m.n).
    return list(dict.fromkeys(problems))


def above_the_seam() -> list[Path]:
    below = (BACKENDS, SRC / "protocol")
    return [p for p in sorted(SRC.rglob("*.py")) if not any(d in p.parents for d in below)]


def test_nothing_above_the_seam_reaches_a_backend_or_a_driver_but_through_the_seam() -> None:
    problems = []
    for path in above_the_seam():
        source = path.read_text(encoding="utf-8")
        problems += door_violations(source, module_name(path), package=path.stem == "__init__")
    assert not problems, "\n".join(problems)


def test_the_door_scan_looks_at_the_command_line_dashboard_and_worker() -> None:
    names = {module_name(p) for p in above_the_seam()}
    assert {"cairnq.cli", "cairnq.cli._target", "cairnq.dashboard._app"} <= names
    assert "cairnq.worker._context" in names
    assert {"cairnq.worker._claimer", "cairnq.worker._heartbeater", "cairnq.client._async"} <= names
    assert not {n for n in names if n.startswith(("cairnq.backends", "cairnq.protocol"))}


@pytest.mark.parametrize(
    ("source", "module", "expected"),
    [
        ("from ..backends.sqlite import SQLiteBackend", "cairnq.cli._x", "backend module"),
        ("from ..backends import postgres", "cairnq.worker._w", "backend module"),
        ("import cairnq.backends.postgres", "cairnq.dashboard._app", "backend module"),
        ("from .backends._postgres_inspect import one_line", "cairnq.x", "backend module"),
        ("import sqlite3", "cairnq.cli._target", "driver sqlite3"),
        ("from psycopg import sql", "cairnq.dashboard._app", "driver psycopg"),
        ("x = getattr(self.backend, 'path', None)", "cairnq.worker._w", "probes a backend"),
        ("ok = hasattr(backend, 'run_on')", "cairnq.client", "probes a backend"),
        ("if backend.dialect == 'sqlite': pass", "cairnq.cli", "branches on a dialect"),
    ],
)
def test_the_door_scan_reports_a_way_around_the_seam(
    source: str, module: str, expected: str
) -> None:
    problems = door_violations(source, module)
    assert len(problems) == 1 and expected in problems[0], problems


@pytest.mark.parametrize(
    "source",
    [
        "from ..backends import Backend, Inspector, open_backend",
        "from ..backends.base import LoopBinding",
        "from .backends._registry import register_backend",
        "import json\nvalue = getattr(module, 'worker')",
        "same = target.dialect == other.dialect",
    ],
)
def test_the_door_scan_lets_the_seam_itself_through(source: str) -> None:
    assert door_violations(source, "cairnq.cli._x") == []
