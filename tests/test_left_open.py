"""A program that ends with a client, backend or worker still open exits at once.

Each case runs ``tests/programs/left_open.py`` in a real process: it uses one kind
of client, backend or worker, prints ``used`` and ends (``asyncio.run`` returns, or
the module ends) without closing anything. Every task cairnq or its drivers started
must end when the event loop shuts down, and every thread must let the interpreter
exit. PostgreSQL is reached through a proxy that holds each new connection a
moment, so the pools are still connecting when the program ends.
"""

from __future__ import annotations

import asyncio
import contextlib
import secrets
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from ._db import Database, drop_schema
from ._pgproxy import PgProxy

PROGRAM = Path(__file__).parent / "programs" / "left_open.py"
# From the program's last call to the process's end: an interpreter exits in well under that.
EXIT_WITHIN_S = 5.0
# Starting the interpreter and running the calls, on a loaded machine.
USED_WITHIN_S = 90.0
CONNECT_DELAY_S = 0.3

ASYNC_KINDS = ["client", "backend", "worker-background", "worker-task"]
TARGETS = ["sqlite", "psycopg", "asyncpg"]
CASES = [
    pytest.param(kind, target, id=f"{kind}-{target}", marks=_marks)
    for kind in [*ASYNC_KINDS, "sync-client"]
    for target in TARGETS
    # SyncCairnQ refuses an executor: it has no asyncpg case.
    if not (kind == "sync-client" and target == "asyncpg")
    for _marks in [[] if target == "sqlite" else [pytest.mark.postgres]]
]


@pytest.fixture
def proxy() -> Iterator[PgProxy]:
    with PgProxy(connect_delay_s=CONNECT_DELAY_S) as running:
        yield running


@contextlib.contextmanager
def _database(
    target: str, tmp_path: Path, request: pytest.FixtureRequest
) -> Iterator[tuple[str, str]]:
    """The URL the program is given for ``target``, and the schema ("" for SQLite)."""
    if target == "sqlite":
        yield f"sqlite:///{tmp_path / 'cairnq.db'}", ""
        return
    from psycopg.conninfo import conninfo_to_dict, make_conninfo

    dsn: str = request.getfixturevalue("pg_dsn")
    port = request.getfixturevalue("proxy").port
    given = conninfo_to_dict(dsn)
    schema = f"t_{secrets.token_hex(5)}"
    if target == "psycopg":
        url = make_conninfo(
            host="127.0.0.1",
            port=port,
            dbname=given["dbname"],
            user=given.get("user"),
            sslmode="disable",
        )
    else:
        user = f"{given['user']}@" if given.get("user") else ""
        url = f"postgresql://{user}127.0.0.1:{port}/{given['dbname']}?sslmode=disable"
    try:
        yield url, schema
    finally:
        drop_schema(dsn, schema)


@pytest.mark.slow  # a program started per case, its exit timed: in the processes lane
@pytest.mark.parametrize(("kind", "target"), CASES)
def test_a_program_leaving_it_open_exits_at_once(
    kind: str, target: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    with _database(target, tmp_path, request) as (url, schema):
        proc = subprocess.Popen(
            [sys.executable, str(PROGRAM), kind, target, url, schema],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        # Only a program that never gets to print is killed here; the exit is timed below.
        watchdog = threading.Timer(USED_WITHIN_S, proc.kill)
        watchdog.start()
        try:
            assert proc.stdout is not None
            used = proc.stdout.readline()
        finally:
            watchdog.cancel()
        try:
            proc.wait(timeout=EXIT_WITHIN_S)
        except subprocess.TimeoutExpired:
            proc.kill()
            _, err = proc.communicate()
            pytest.fail(f"still running {EXIT_WITHIN_S:g} s after its last call\n{err}")
        _, err = proc.communicate()
        assert (used, proc.returncode) == ("used\n", 0), err
        assert "Traceback" not in err


async def test_a_closed_client_leaves_no_task_of_its_own_running(db: Database) -> None:
    before = asyncio.all_tasks()
    async with db.client() as cq:
        task = await cq.submit("job", {})
        await asyncio.gather(*(cq.get(task.id) for _ in range(6)))
    await asyncio.sleep(0)
    assert sorted(t.get_name() for t in asyncio.all_tasks() - before) == []
