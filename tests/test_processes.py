"""Real OS processes sharing one database: migrations, producers, workers."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import pytest

from cairnq import SyncCairnQ
from cairnq.protocol.statements import migrations

from ._db import Database

ROOT = Path(__file__).resolve().parents[1]

pytestmark = pytest.mark.slow


def spawn(db: Database, *args: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "tests._child", args[0], db.spec(), *args[1:]],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def finish(proc: subprocess.Popen[str], timeout: float = 120) -> str:
    out, err = proc.communicate(timeout=timeout)
    assert proc.returncode == 0, f"child failed ({proc.returncode}):\n{err}"
    return out


def wait_until_succeeded(client: SyncCairnQ, count: int, timeout: float = 120) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if client.stats().get("default", {}).get("succeeded", 0) >= count:
            return
        time.sleep(0.1)
    raise AssertionError(f"not all {count} tasks succeeded in {timeout} s: {client.stats()}")


@pytest.mark.fresh_schema
def test_four_processes_migrating_at_once_apply_each_migration_once(db: Database) -> None:
    start_at = str(time.time() + 1.5)
    procs = [spawn(db, "migrate", start_at) for _ in range(4)]
    applied = [json.loads(finish(p))["applied"] for p in procs]
    everything = Counter(name for names in applied for name in names)
    expected = [m.name for m in migrations(db.kind)]  # type: ignore[arg-type]
    assert sorted(everything) == expected
    assert set(everything.values()) == {1}


def test_one_process_submits_and_waits_while_another_runs_the_worker(
    db: Database, tmp_path: Path
) -> None:
    stop = tmp_path / "stop"
    worker = spawn(db, "worker", str(tmp_path / "runs.log"), str(stop), "2")
    try:
        results = json.loads(finish(spawn(db, "submit_wait", "20")))
    finally:
        stop.touch()
        finish(worker)
    assert [r["status"] for r in results] == ["succeeded"] * 20
    assert [r["result"]["n"] for r in results] == list(range(20))
    assert {r["result"]["pid"] for r in results} == {worker.pid}


def test_three_worker_processes_drain_every_task_exactly_once(db: Database, tmp_path: Path) -> None:
    count = 1000 if db.kind == "sqlite" else 2000
    log = tmp_path / "runs.log"
    stop = tmp_path / "stop"
    workers = [spawn(db, "worker", str(log), str(stop), "4") for _ in range(3)]
    try:
        producers = [spawn(db, "submit", str(count // 2), str(i * count // 2)) for i in range(2)]
        submitted = [task_id for p in producers for task_id in json.loads(finish(p))]
        with db.sync_client() as client:
            wait_until_succeeded(client, count)
            tasks = client.list(limit=count)
    finally:
        stop.touch()
        for w in workers:
            finish(w)
    runs = [line.split() for line in log.read_text().splitlines()]
    executions = Counter(task_id for task_id, _, _ in runs)
    assert len(submitted) == len(set(submitted)) == count
    assert set(executions) == set(submitted)
    assert set(executions.values()) == {1}
    assert {attempt for _, attempt, _ in runs} == {"1"}
    assert {t.status for t in tasks} == {"succeeded"} and len(tasks) == count
    assert sorted(t.result["n"] for t in tasks) == list(range(count))
    assert len({pid for _, _, pid in runs}) >= 2
