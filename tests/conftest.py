"""Shared fixtures: one test body runs on every backend.

``db`` is a fresh, empty, migrated database for one test: a SQLite file in
``tmp_path`` (a copy of a file migrated once per test process), or the test
process's PostgreSQL schema, emptied after each test (``SchemaPool``). A test
that needs a database nothing has migrated yet, or its own new schema, is
marked ``fresh_schema``. PostgreSQL is found at
``CAIRNQ_TEST_POSTGRES_URL`` (default ``postgresql://127.0.0.1:5432/postgres``);
when it cannot be reached its tests are skipped with the reason, unless
``CAIRNQ_REQUIRE_POSTGRES=1`` (set by CI), which turns that into a failure.
"""

from __future__ import annotations

import inspect
import os
import secrets
import signal
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest

from cairnq.protocol.statements import added_roots, drop_folder

from ._connections import postgres_connections
from ._db import (
    Database,
    PluginDatabase,
    SchemaPool,
    admin_connect,
    copy_sqlite_template,
    drop_schema,
    migrated_sqlite_template,
)

PG_URL = os.environ.get("CAIRNQ_TEST_POSTGRES_URL", "postgresql://127.0.0.1:5432/postgres")
REQUIRE_PG = os.environ.get("CAIRNQ_REQUIRE_POSTGRES") == "1"


@pytest.fixture(scope="session")
def pg_dsn() -> Iterator[str]:
    """A PostgreSQL database created for this test session, dropped afterwards."""
    try:
        import psycopg  # noqa: F401

        admin = admin_connect(PG_URL)
    except Exception as exc:
        message = f"PostgreSQL not reachable at {PG_URL}: {exc}"
        if REQUIRE_PG:
            pytest.fail(f"{message} (CAIRNQ_REQUIRE_POSTGRES=1)", pytrace=False)
        pytest.skip(message)
    name = f"cairnq_test_{os.getpid()}_{secrets.token_hex(3)}"
    with admin:
        admin.execute(f'create database "{name}"')
        # Commits need not wait for the WAL to reach the disk: what a test sees is the
        # same (a commit is visible to other sessions at once); only a crash of this
        # shared server could lose the last ones, and the crash tests run private
        # clusters with the default settings (tests/chaos/pgcluster.py).
        admin.execute(f'alter database "{name}" set synchronous_commit = off')
    from psycopg.conninfo import make_conninfo

    dsn = make_conninfo(PG_URL, dbname=name)
    try:
        yield dsn
    finally:
        with admin_connect(PG_URL) as admin:
            admin.execute(f'drop database if exists "{name}" with (force)')


@pytest.fixture(scope="session")
def sqlite_template(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A SQLite file migrated once for this test process; ``db`` hands out copies."""
    return migrated_sqlite_template(tmp_path_factory.mktemp("template") / "cairnq.db")


@pytest.fixture(scope="session")
def schema_pool(pg_dsn: str) -> Iterator[SchemaPool]:
    """This test process's migrated PostgreSQL schema, emptied between tests."""
    pool = SchemaPool(pg_dsn)
    try:
        yield pool
    finally:
        pool.close()


def _fresh_schema(request: pytest.FixtureRequest) -> bool:
    return request.node.get_closest_marker("fresh_schema") is not None


def _sqlite(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Database]:
    path = tmp_path / "cairnq.db"
    if not _fresh_schema(request):
        copy_sqlite_template(request.getfixturevalue("sqlite_template"), path)
    database = Database.sqlite(path)
    yield database
    database.close_all()


def _postgres(request: pytest.FixtureRequest) -> Iterator[Database]:
    dsn = request.getfixturevalue("pg_dsn")
    if _fresh_schema(request):
        database = Database.postgres(dsn, f"t_{secrets.token_hex(5)}")
        try:
            yield database
        finally:
            database.close_all()
            drop_schema(dsn, database.schema or "")
        return
    pool: SchemaPool = request.getfixturevalue("schema_pool")
    database = Database.postgres(dsn, pool.checkout())
    try:
        yield database
    finally:
        database.close_all()
        pool.checkin()


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def db(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Database]:
    """A fresh, migrated database on each backend (``fresh_schema``: not yet migrated)."""
    if request.param == "sqlite":
        yield from _sqlite(request, tmp_path)
    else:
        yield from _postgres(request)


@pytest.fixture(autouse=True)
def _lane_connections(request: pytest.FixtureRequest) -> Iterator[None]:
    """A lane test on PostgreSQL holds the connection lock shared (``tests/_connections.py``)."""
    node = request.node
    lane = node.get_closest_marker("xdist_group") is not None
    kind = "postgres" if lane and node.get_closest_marker("postgres") else ""
    with postgres_connections(kind):
        yield


@pytest.fixture(autouse=True)
def _added_folders_forgotten() -> Iterator[None]:
    """The folders of outside extensions a test added (a client or worker given one adds
    its folder to the process) are forgotten after it, so no later test in the process
    reads their statements, applies their migrations or sees their tables."""
    before = {str(root) for root in added_roots()}
    yield
    for root in added_roots():
        if str(root) not in before:
            drop_folder(root)


@pytest.fixture(autouse=True)
def _pools_closed_on_the_test_loop(request: pytest.FixtureRequest) -> None:
    """In an async test on ``db``, close its PostgreSQL backends on the test's own loop.

    Left open, their async pools would be cancelled mid-flight when the loop ends.
    """
    if "db" in request.fixturenames and inspect.iscoroutinefunction(request.function):
        request.getfixturevalue("_db_backends_aclosed")


@pytest.fixture
async def _db_backends_aclosed(db: Database) -> AsyncIterator[None]:
    yield
    if db.kind == "postgres":
        await db.aclose_all()


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def fresh(request: pytest.FixtureRequest) -> PluginDatabase:
    """A fresh, migrated database on each backend, from cairnq's own pytest plugin.

    The plugin's ``cairnq_sqlite`` copies a template file and ``cairnq_postgres``
    creates a database from a template (``$CAIRNQ_TEST_POSTGRES_URL``).
    """
    fixture = "cairnq_sqlite" if request.param == "sqlite" else "cairnq_postgres"
    return PluginDatabase(request.param, str(request.getfixturevalue(fixture)))


@pytest.fixture
def sqlite_db(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Database]:
    """A fresh SQLite database (for SQLite-only behaviour)."""
    yield from _sqlite(request, tmp_path)


@pytest.fixture
def pg_db(request: pytest.FixtureRequest) -> Iterator[Database]:
    """A fresh PostgreSQL schema (for PostgreSQL-only behaviour)."""
    yield from _postgres(request)


LONG_RUNNING = {"test_random_operation_sequences_keep_database_and_model_in_step"}
"""Tests whose work alone takes a minute or more (the driver suite's Hypothesis state
machine: thousands of steps against a real database), so pytest's 120 s hang limit
(``timeout`` in pyproject.toml) would cut a slow but healthy run short on a loaded machine."""
LONG_RUNNING_TIMEOUT_S = 600

HEAVY = {
    # a whole first hour on the terminal, a process per command
    "test_the_first_hour_reports_every_mistake_on_the_terminal",
    # a hundred times the running tasks, to show a batch reads no more
    "test_a_batch_reads_no_more_with_a_hundred_times_the_running_tasks",
    # every scenario again, through the command line or with real sleeps
    "test_cli_exits_zero_when_every_scenario_passes",
    "test_scenarios_pass_with_real_sleeps",
    "test_timed_scenarios_pass_through_the_store_layer_with_real_sleeps",
    # processes killed, waited for, or answering on a pseudo-terminal
    "test_submit_wait_reports_an_unclaimed_task_naming_the_database_without_a_timeout",
    "test_a_task_killed_after_step_3_of_5_resumes_at_step_4_on_another_process",
    "test_a_dependent_another_process_submitted_is_released_within_the_bound",
    "test_a_killed_workers_last_attempt_fails_via_a_busy_worker_of_another_queue",
    "test_purge_on_a_terminal_deletes_nothing_unless_the_answer_is_yes",
}
"""Tests of a few seconds each, of work that is the point (many processes, real sleeps, a
hundred times the rows): marked ``heavy``, which ``./scripts/test.sh --fast`` leaves out
and CI runs with the rest."""

FRESH_SCHEMA = {"test_every_migration_applies_to_a_fresh_database"}
"""Tests of the driver suite (``cairnq.drivertest``, which knows no pytest mark of ours)
that need a database not yet migrated: ``fresh_schema``."""


LANES = {"mutants": "mutants", "chaos": "chaos", "slow": "processes", "browser": "processes"}
"""Marks whose tests run in a lane of their own under pytest-xdist (``--dist loadgroup``):
one test at a time per lane, beside the other test processes, so the many processes
and the timing windows of one are not squeezed by another of its kind."""


def pytest_configure(config: pytest.Config) -> None:
    """Ctrl-C reaches the programs the tests start, as it does from a terminal.

    A shell without job control starts a background command with SIGINT ignored,
    and an ignored signal stays ignored in every program started from it; the
    tests that press Ctrl-C on a ``cairnq`` command would then wait in vain.
    """
    if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.default_int_handler)


def pytest_itemcollected(item: pytest.Item) -> None:
    """Put a lane test in its lane (as it is collected: pytest-xdist reads the groups when
    collection ends, before other hooks may have run)."""
    lane = next((LANES[m] for m in LANES if item.get_closest_marker(m)), None)
    if lane is not None and item.get_closest_marker("xdist_group") is None:
        item.add_marker(pytest.mark.xdist_group(lane))


@pytest.hookimpl(trylast=True)
def pytest_collection_finish(session: pytest.Session) -> None:
    """Under ``--dist loadgroup``, refuse to run when the lanes did not take: a pytest-xdist
    that can no longer group tests would run the chaos tests side by side, silently."""
    if not session.config.getoption("loadgroup", default=False):
        return
    ungrouped = [
        item.nodeid
        for item in session.items
        if item.get_closest_marker("xdist_group") is not None and "@" not in item.nodeid
    ]
    if ungrouped:
        raise pytest.UsageError(
            f"pytest-xdist did not put {len(ungrouped)} test(s) in their lane "
            f"(e.g. {ungrouped[0]}): check the pytest and pytest-xdist versions"
        )


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Mark the heavy tests, the driver suite's tests that need a database not yet
    migrated, and give the long-running tests a hang limit that fits their work and the
    ``long`` mark (``./scripts/test.sh --fast`` leaves the heavy and long ones out)."""
    for item in items:
        if getattr(item, "originalname", "") in HEAVY:
            item.add_marker(pytest.mark.heavy)
        if getattr(item, "originalname", "") in FRESH_SCHEMA:
            item.add_marker(pytest.mark.fresh_schema)
        if getattr(item, "originalname", "") in LONG_RUNNING:
            item.add_marker(pytest.mark.timeout(LONG_RUNNING_TIMEOUT_S))
            item.add_marker(pytest.mark.long)


def _encodable(value: Any) -> Any:
    """``value`` with lone surrogates in its strings written as ``\\udxxx`` escapes."""
    if isinstance(value, str):
        try:
            value.encode("utf-8")
        except UnicodeEncodeError:
            return value.encode("utf-8", "backslashreplace").decode("utf-8")
        return value
    if isinstance(value, dict):
        return {_encodable(k): _encodable(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return type(value)(_encodable(v) for v in value)
    return value


@pytest.hookimpl(hookwrapper=True)
def pytest_report_to_serializable(config: pytest.Config, report: Any) -> Iterator[None]:
    """A test report carries lone surrogates as escapes (a test of odd text can log them),
    so pytest-xdist, which sends reports as UTF-8, can pass it on."""
    outcome = yield
    data = outcome.get_result()  # type: ignore[attr-defined]
    if data is not None:
        outcome.force_result(_encodable(data))  # type: ignore[attr-defined]
