"""``cairnq worker`` as an operator runs it.

The script's entry function runs in this process under the conditions a shell
gives the installed script (``tests/_inprocess.py``: the operator's directory,
no database in the environment, nothing configured logging); the installed
script runs in a subprocess where a signal stops the worker.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import textwrap
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import IO
from urllib.parse import urlsplit, urlunsplit

import pytest

from cairnq import SyncCairnQ

from ._db import Database
from ._inprocess import run_cairnq
from .conftest import PG_URL

SCRIPT = Path(sys.executable).parent / "cairnq"


def cairnq(cwd: Path, *argv: str) -> subprocess.CompletedProcess[str]:
    """``cairnq ARGV`` in ``cwd``, run in this process as the installed script runs."""
    code, out, err = run_cairnq(*argv, cwd=cwd)
    return subprocess.CompletedProcess(["cairnq", *argv], code, out, err)


@pytest.fixture
def cq(db: Database) -> Iterator[SyncCairnQ]:
    """A client on ``db``, which it creates and migrates."""
    with db.sync_client() as client:
        client.open()
        yield client


def make_worker(db: Database) -> str:
    if db.kind == "sqlite":
        return f"Worker.sqlite({str(db.path)!r})"
    return f"Worker.postgres({db.url!r}, schema={db.schema!r}, listen=False)"


def write_app(where: Path, make: str, body: str = "return payload") -> None:
    where.parent.mkdir(parents=True, exist_ok=True)
    where.write_text(
        textwrap.dedent(
            f"""
            from cairnq import CairnQ, Worker

            worker = {make}

            @worker.task("email.send")
            async def send(ctx, payload):
                {body}

            @worker.task("audit")
            async def audit(ctx, payload):
                return None
            """
        )
    )


def db_options(db: Database) -> list[str]:
    if db.kind == "sqlite":
        return ["--db", str(db.path)]
    from psycopg.conninfo import conninfo_to_dict

    params = conninfo_to_dict(db.url)
    url = f"postgresql://{params.get('host', '127.0.0.1')}:{params.get('port', 5432)}"
    return ["--db", f"{url}/{params['dbname']}", "--schema", str(db.schema)]


def test_worker_banner_names_the_database_queues_concurrency_and_task_names(
    db: Database, cq: SyncCairnQ, tmp_path: Path
) -> None:
    write_app(tmp_path / "jobs_banner.py", make_worker(db))
    result = cairnq(tmp_path, "worker", "jobs_banner:worker", "--until-idle", "--concurrency", "2")
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[0].endswith(": queues default, concurrency 2; Ctrl-C to stop")
    where = str(db.path) if db.kind == "sqlite" else f"(schema {db.schema})"
    assert lines[1].startswith("  database: ") and where in lines[1]
    assert lines[2] == "  tasks: audit, email.send"
    assert "password" not in result.stdout


def test_worker_db_option_moves_a_worker_built_from_a_path(
    db: Database, cq: SyncCairnQ, tmp_path: Path
) -> None:
    write_app(tmp_path / "jobs_moved.py", "Worker.sqlite('own.db')")
    task = cq.submit("email.send", {"to": "ada"})
    result = cairnq(tmp_path, "worker", "jobs_moved:worker", "--until-idle", *db_options(db))
    assert result.returncode == 0, result.stderr
    done = cq.get(task.id)
    assert done is not None and done.status == "succeeded"
    assert done.result == {"to": "ada"}
    assert not (tmp_path / "own.db").exists()


def environment_of(db: Database) -> dict[str, str]:
    """The environment naming ``db`` in ``$CAIRNQ_DATABASE_URL`` (and ``$CAIRNQ_SCHEMA``)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("CAIRNQ_")}
    named = db_options(db)
    env["CAIRNQ_DATABASE_URL"] = named[1]
    if "--schema" in named:
        env["CAIRNQ_SCHEMA"] = named[3]
    return env


def test_worker_serves_the_database_named_by_the_environment_over_its_code(
    db: Database, cq: SyncCairnQ, tmp_path: Path
) -> None:
    write_app(tmp_path / "jobs_env.py", "Worker.sqlite('own.db')")
    task = cq.submit("email.send", {"to": "ada"})
    result = subprocess.run(
        [str(SCRIPT), "worker", "jobs_env:worker", "--until-idle"],
        cwd=tmp_path,
        env=environment_of(db),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 0, result.stderr
    [database] = [line for line in result.stdout.splitlines() if "database: " in line]
    assert database.endswith(" (from $CAIRNQ_DATABASE_URL)")
    done = cq.get(task.id)
    assert done is not None and done.status == "succeeded"
    assert not (tmp_path / "own.db").exists()


def test_worker_given_an_open_client_says_in_one_line_that_the_environment_names_another(
    tmp_path: Path,
) -> None:
    write_app(tmp_path / "jobs_env_client.py", "Worker(CairnQ('own.db'))")
    env = {k: v for k, v in os.environ.items() if not k.startswith("CAIRNQ_")}
    env["CAIRNQ_DATABASE_URL"] = "other.db"
    result = subprocess.run(
        [str(SCRIPT), "worker", "jobs_env_client:worker", "--until-idle"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 0, result.stderr
    [said] = [line for line in result.stderr.splitlines() if "CAIRNQ_DATABASE_URL" in line]
    assert said == (
        f"cairnq worker: $CAIRNQ_DATABASE_URL names {tmp_path / 'other.db'}, but "
        "jobs_env_client:worker was built with an open client and serves "
        f"{tmp_path / 'own.db'}; unset the variable, or build the Worker from a URL or "
        "path to follow it"
    )
    assert f"database: {tmp_path / 'own.db'}" in result.stdout
    assert not (tmp_path / "other.db").exists()


def test_worker_db_option_is_refused_for_a_worker_given_an_open_client(
    sqlite_db: Database, tmp_path: Path
) -> None:
    write_app(tmp_path / "jobs_client.py", "Worker(CairnQ('own.db'))")
    other = tmp_path / "other.db"
    result = cairnq(tmp_path, "worker", "jobs_client:worker", "--until-idle", "--db", str(other))
    assert result.returncode == 1
    [line] = result.stderr.splitlines()
    assert line.startswith(
        "cairnq: error: jobs_client:worker was built with an open client; --db cannot move it"
    )
    assert not other.exists()


def test_worker_serves_a_file_path_with_its_directory_on_sys_path(
    db: Database, cq: SyncCairnQ, tmp_path: Path
) -> None:
    (tmp_path / "app").mkdir()
    (tmp_path / "app" / "wording.py").write_text("GREETING = 'hello'\n")
    write_app(
        tmp_path / "app" / "tasks.py",
        make_worker(db),
        body="import wording; return wording.GREETING",
    )
    task = cq.submit("email.send", {})
    result = cairnq(tmp_path, "worker", "app/tasks.py", "--until-idle")
    assert result.returncode == 0, result.stderr
    done = cq.get(task.id)
    assert done is not None and done.result == "hello"


def test_worker_serves_a_file_path_with_an_attribute(sqlite_db: Database, tmp_path: Path) -> None:
    write_app(tmp_path / "app" / "tasks.py", make_worker(sqlite_db))
    with open(tmp_path / "app" / "tasks.py", "a") as source:
        source.write("other = worker\n")
    result = cairnq(
        tmp_path, "worker", str(tmp_path / "app" / "tasks.py") + ":other", "--until-idle"
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines()[2] == "  tasks: audit, email.send"


def test_worker_of_a_missing_file_is_one_clear_error(tmp_path: Path) -> None:
    result = cairnq(tmp_path, "worker", "app/tasks.py:worker")
    assert result.returncode == 1
    assert result.stderr.splitlines() == [
        f"cairnq: error: no such file: app/tasks.py (in {tmp_path})"
    ]


def test_worker_log_format_json_writes_one_json_object_per_line_on_stderr(
    sqlite_db: Database, tmp_path: Path
) -> None:
    write_app(
        tmp_path / "jobs_json.py", make_worker(sqlite_db), body="raise RuntimeError('kaboom')"
    )
    with sqlite_db.sync_client() as cq:
        task = cq.submit("email.send", {}, max_attempts=1)
    result = cairnq(tmp_path, "worker", "jobs_json:worker", "--until-idle", "--log-format", "json")
    assert result.returncode == 0, result.stderr
    documents = [json.loads(line) for line in result.stderr.splitlines()]
    [failed] = [d for d in documents if d.get("task_id") == task.id]
    assert failed["level"] == "ERROR"
    assert failed["logger"] == "cairnq.worker"
    assert (failed["task_name"], failed["queue"], failed["attempt"]) == ("email.send", "default", 1)
    assert failed["outcome"] == "failed"
    assert failed["duration_ms"] >= 0
    assert failed["worker_id"].startswith("worker_")
    assert failed["exc_info"].endswith("RuntimeError: kaboom")
    assert {d["logger"] for d in documents} == {"cairnq.worker"}


def free_port() -> int:
    """A local TCP port nothing listens on (bound, then released)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


class Lines:
    """The lines a stream writes, collected by a thread as they come."""

    def __init__(self, stream: IO[str]) -> None:
        self.lines: list[str] = []
        self._thread = threading.Thread(target=self._read, args=(stream,), daemon=True)
        self._thread.start()

    def _read(self, stream: IO[str]) -> None:
        for line in stream:
            self.lines.append(line.rstrip("\n"))

    def wait_for(self, text: str, count: int, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while sum(text in line for line in self.lines) < count:
            if time.monotonic() > deadline:
                raise AssertionError(f"{count} lines with {text!r} not seen: {self.lines}")
            time.sleep(0.05)

    def join(self) -> list[str]:
        self._thread.join(10)
        return self.lines


@pytest.mark.slow
def test_worker_on_an_unreachable_postgres_logs_one_line_per_interval_and_stops_on_sigterm(
    tmp_path: Path,
) -> None:
    pytest.importorskip("psycopg_pool")
    port = free_port()
    url = f"postgresql://cairnq@127.0.0.1:{port}/app"
    write_app(tmp_path / "jobs_down.py", f"Worker({url!r}, drain_timeout='2s')")
    env = {k: v for k, v in os.environ.items() if k not in ("CAIRNQ_DATABASE_URL", "CAIRNQ_SCHEMA")}
    proc = subprocess.Popen(
        [str(SCRIPT), "worker", "jobs_down:worker"],
        cwd=tmp_path,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    err = Lines(proc.stderr)  # type: ignore[arg-type]
    try:
        # One line per 5 s interval: the second is due about 10 s after the start.
        err.wait_for("cannot reach", 2, timeout=30)
        proc.send_signal(signal.SIGTERM)
        signaled = time.monotonic()
        proc.wait(timeout=30)
        stopped_after = time.monotonic() - signaled
    finally:
        proc.kill()
        proc.communicate()
    lines = err.join()
    assert proc.returncode == 0, lines
    assert stopped_after < 2 + 3  # drain_timeout_ms, and a generous margin
    unreachable = [line for line in lines if "cannot reach" in line]
    assert len(unreachable) >= 2
    for line in unreachable:
        assert line.endswith(
            f"WARNING cairnq.postgres: cannot reach PostgreSQL 127.0.0.1:{port}/app: "
            "Connection refused; retrying in 5s"
        )
    assert not [line for line in lines if "psycopg" in line or "Traceback" in line]
    assert not [line for line in lines if line.startswith((" ", "\t"))]


def test_worker_schema_option_without_a_database_url_is_a_usage_error(tmp_path: Path) -> None:
    write_app(tmp_path / "jobs_path.py", "Worker.sqlite('own.db')")
    result = cairnq(tmp_path, "worker", "jobs_path:worker", "--until-idle", "--schema", "jobs")
    assert result.returncode == 2
    [line] = result.stderr.splitlines()
    assert line == (
        "cairnq: error: --schema alone cannot move the worker: name its database with "
        "--db (or $CAIRNQ_DATABASE_URL) too"
    )
    assert not (tmp_path / "own.db").exists()


@pytest.mark.slow
@pytest.mark.postgres
def test_worker_on_a_postgres_database_that_does_not_exist_stops_with_one_line(
    tmp_path: Path, pg_dsn: str
) -> None:
    pytest.importorskip("psycopg_pool")
    # pg_dsn (a libpq key=value string) only proves the server is up; the Worker takes a URL.
    url = urlunsplit(urlsplit(PG_URL)._replace(path="/cairnq_no_such_database"))
    write_app(tmp_path / "jobs_nodb.py", f"Worker({url!r})")
    started = time.monotonic()
    result = cairnq(tmp_path, "worker", "jobs_nodb:worker")
    took = time.monotonic() - started
    assert result.returncode == 1
    lines = result.stderr.splitlines()
    assert lines[-1].startswith("cairnq: error: PostgreSQL ")
    assert lines[-1].endswith(
        'refused the connection: FATAL:  database "cairnq_no_such_database" does not exist'
    )
    assert not [line for line in lines if "retrying" in line or "Traceback" in line]
    assert took < 30  # OPEN_TIMEOUT_S: it did not wait out the open timeout
