"""The blocking PostgreSQL path, generated from the async one, honours what the async one does."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from cairnq import DatabaseUnavailable, SyncCairnQ, kernel

from ._db import Database
from ._pgproxy import PgProxy

pytestmark = pytest.mark.postgres

ROOT = Path(__file__).resolve().parent.parent

# argv: DSN, schema. Submits one keyed task with the blocking client; an armed
# crash point ends the process with 137 before it prints.
SUBMIT = """
import sys
from cairnq import SyncCairnQ
from cairnq.backends.postgres import PostgresBackend
backend = PostgresBackend(sys.argv[1], schema=sys.argv[2], listen=False)
with SyncCairnQ(backend) as cq:
    cq.submit("job", {}, key="crash:1")
print("survived")
"""


def _through(proxy: PgProxy, db: Database) -> str:
    from psycopg.conninfo import conninfo_to_dict, make_conninfo

    given = conninfo_to_dict(db.url)
    return make_conninfo(
        host="127.0.0.1",
        port=proxy.port,
        dbname=given["dbname"],
        user=given.get("user"),
        sslmode="disable",
    )


def test_a_blocking_operation_on_a_silent_connection_fails_after_op_timeout_s(
    pg_db: Database,
) -> None:
    from cairnq.backends.postgres import PostgresBackend

    with PgProxy() as proxy:
        backend = PostgresBackend(
            _through(proxy, pg_db),
            schema=pg_db.schema,
            listen=False,
            min_size=1,
            max_size=1,
            op_timeout=0.5,
        )
        try:
            backend.run(kernel.stats(None), write=False)
            assert proxy.blackhole(listening=False) >= 1
            started = time.monotonic()
            with pytest.raises(DatabaseUnavailable, match=r"did not answer within 0\.5 s"):
                backend.run(kernel.stats(None), write=False)
            elapsed = time.monotonic() - started
        finally:
            proxy.heal()
            backend.close()
    assert 0.4 < elapsed < 10


def test_a_blocking_operation_answered_in_time_is_not_cut(pg_db: Database) -> None:
    with pg_db.sync_client(op_timeout=0.5) as cq:
        tasks = [cq.submit("job", {"i": i}) for i in range(20)]
        time.sleep(0.7)
        listed = cq.list(limit=100)
    assert {t.id for t in listed} == {t.id for t in tasks}


@pytest.mark.parametrize(("phase", "stored"), [("before_commit", False), ("after_commit", True)])
def test_a_blocking_submit_dying_around_its_commit_is_uncommitted_before_and_committed_after(
    pg_db: Database, phase: str, stored: bool
) -> None:
    with pg_db.sync_client() as setup:
        setup.stats()
    done = subprocess.run(
        [sys.executable, "-c", SUBMIT, pg_db.url, pg_db.schema or ""],
        cwd=ROOT,
        env={**os.environ, "CAIRNQ_CRASHPOINT": f"{phase}:submit"},
        capture_output=True,
        timeout=60,
    )
    assert done.returncode == 137, done.stdout + done.stderr
    with pg_db.sync_client() as cq:
        assert (cq.get_by_key("crash:1") is not None) == stored


def test_the_blocking_client_has_no_listen_task_of_its_own(pg_db: Database) -> None:
    backend = pg_db.backend(listen=True)
    with SyncCairnQ(backend) as cq:
        cq.stats()
        listening = backend.listening  # type: ignore[attr-defined]
    backend.close()
    assert listening is False


def test_a_timed_out_operation_on_the_applications_connection_is_cancelled_not_broken(
    pg_db: Database,
) -> None:
    import psycopg
    from psycopg import sql

    from cairnq.backends.postgres import PostgresBackend

    with pg_db.sync_client() as setup:
        task = setup.submit("job", {})
    search_path = sql.SQL("set search_path to {}").format(sql.Identifier(pg_db.schema or "public"))
    with psycopg.connect(pg_db.url, autocommit=True) as app, psycopg.connect(pg_db.url) as locker:
        app.execute(search_path)
        locker.execute(search_path)
        locker.execute("select id from cairnq_tasks where id = %s for update", (task.id,))
        cq = SyncCairnQ(PostgresBackend(app, schema=pg_db.schema, op_timeout=0.5))
        with pytest.raises(DatabaseUnavailable, match=r"did not answer within 0\.5 s"):
            cq.cancel(task.id)
        locker.rollback()
        assert app.execute("select 1").fetchone() == (1,)
        fetched = cq.get(task.id)
        cq.close()
    assert fetched is not None and fetched.status == "queued"
