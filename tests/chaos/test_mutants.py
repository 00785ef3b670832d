"""The checker has teeth: deliberately broken builds are caught, the real build is not.

Each mutant (see ``programs.MUTANTS``) runs the scenario that exposes it; the same
scenario on the real build is the control and must come out valid.
"""

from __future__ import annotations

import json
import signal
import time
from pathlib import Path

import pytest

from .._db import Database
from .checker import Report
from .harness import Config, Run

pytestmark = [pytest.mark.chaos, pytest.mark.slow]


def _stale_writer_run(db: Database, folder: Path, mutant: str | None) -> Report:
    """Two processes share a worker id; one is frozen past its lease and resumes mid-rerun."""
    config = Config(
        workers=0,
        clients=1,
        tasks_per_client=6,
        mix=(1, 0, 0, 0),
        sleep_ms=(300, 350),
        lease_ms=400,
        heartbeat_ms=100,
        worker_id="shared-worker",
        seed=5,
        mutant=mutant,
    )
    run = Run(db, folder, config)
    try:
        run.start_clients()
        run.wait_clients()
        zombie = run.start_worker(concurrency=6)
        _until(db, lambda s: s.get("running", 0) >= 6)
        run.signal_worker(zombie, signal.SIGSTOP)
        time.sleep(0.6)
        run.start_worker(concurrency=6)
        deadline = time.monotonic() + 30
        with db.sync_client() as client:
            while sum(t.attempt == 2 for t in client.list(status="running")) < 3:
                assert time.monotonic() < deadline, "the rescuer never re-claimed the tasks"
                time.sleep(0.005)
        run.signal_worker(zombie, signal.SIGCONT)
        time.sleep(1.0)
        quiescent = run.quiesce()
    finally:
        run.stop()
    return run.check(quiescent=quiescent)


def _until(db: Database, condition: object, timeout: float = 30) -> None:
    deadline = time.monotonic() + timeout
    with db.sync_client() as client:
        while not condition(client.stats().get("default", {})):  # type: ignore[operator]
            assert time.monotonic() < deadline, "the scenario never reached its state"
            time.sleep(0.01)


def _canceled_then_crashed_run(db: Database, folder: Path, mutant: str | None) -> Report:
    """Running tasks get a cancel request, then their worker dies; recovery must cancel them."""
    config = Config(
        workers=0,
        clients=1,
        tasks_per_client=5,
        mix=(1, 0, 0, 0),
        sleep_ms=(5000, 5000),
        lease_ms=500,
        heartbeat_ms=100,
        mutant=mutant,
    )
    run = Run(db, folder, config)
    try:
        run.start_clients()
        run.wait_clients()
        doomed = run.start_worker(concurrency=5)
        _until(db, lambda s: s.get("running", 0) == 5)
        with db.sync_client() as client:
            for task in client.list(status="running"):
                client.cancel(task.id)
        run.kill_worker(doomed)
        run.start_worker(concurrency=5, sleep_ms=[5, 10])
        time.sleep(2.0)
        quiescent = run.quiesce()
    finally:
        run.stop()
    return run.check(quiescent=quiescent)


def _claim_storm_run(db: Database, folder: Path, mutant: str | None) -> Report:
    """Fifty claimers (5 processes x 10) fire at one queued task, round after round."""
    config = Config(workers=0, clients=0, mutant=mutant)
    run = Run(db, folder, config)
    rounds = 15
    with db.sync_client() as client:
        for r in range(rounds):
            client.submit("job", {"r": r}, queue=f"storm{r}")
    start_at = time.time() + 2.0
    procs = []
    for p in range(5):
        spec = {
            "db": json.loads(db.spec()),
            "history": str(folder / f"claimer-{p}.jsonl"),
            "rounds": rounds,
            "start_at": start_at,
            "interval_s": 0.25,
            "per_process": 10,
            "lease_ms": 30_000,
            "mutant": mutant,
        }
        procs.append(run._spawn("claimers", spec))
    for proc in procs:
        assert proc.wait(timeout=60) == 0
    return run.check(quiescent=False)


def _keyed_storm_run(db: Database, folder: Path, mutant: str | None) -> Report:
    """Five processes submit the same 20 keys, ten times each, at one instant."""
    config = Config(workers=0, clients=0, mutant=mutant, allow_busy_errors=False)
    run = Run(db, folder, config)
    start_at = time.time() + 2.0
    procs = []
    for p in range(5):
        spec = {
            "db": json.loads(db.spec()),
            "history": str(folder / f"keyed-{p}.jsonl"),
            "keys": 20,
            "per_key": 10,
            "conflict": "reuse",
            "start_at": start_at,
            "mutant": mutant,
        }
        procs.append(run._spawn("keyed", spec))
    for proc in procs:
        assert proc.wait(timeout=120) == 0
    return run.check(quiescent=False)


SCENARIOS = {
    "no_fence": (_stale_writer_run, {"INV-4", "INV-5", "INV-3"}),
    "recover_ignores_cancel": (_canceled_then_crashed_run, {"INV-8"}),
    "claim_without_fence": (_claim_storm_run, {"INV-6"}),
    "deferred": (_keyed_storm_run, {"E2"}),
}
DIALECTS = {"claim_without_fence": "postgres", "deferred": "sqlite"}


@pytest.mark.parametrize("mutant", sorted(SCENARIOS))
def test_the_checker_catches_the_mutant(db: Database, tmp_path: Path, mutant: str) -> None:
    if DIALECTS.get(mutant, db.kind) != db.kind:
        pytest.skip(f"the {mutant} mutant breaks {DIALECTS[mutant]} only")
    scenario, expected = SCENARIOS[mutant]
    report = scenario(db, tmp_path, mutant)
    assert not report.valid, f"mutant {mutant} went unnoticed:\n{report.summary()}"
    assert {v.invariant for v in report.violations} & expected, report.summary()


@pytest.mark.parametrize("mutant", sorted(SCENARIOS))
def test_the_real_build_passes_the_same_scenario(db: Database, tmp_path: Path, mutant: str) -> None:
    scenario, _ = SCENARIOS[mutant]
    report = scenario(db, tmp_path, None)
    assert report.valid, report.summary()
