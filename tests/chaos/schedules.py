"""The schedules chaos scenario: worker processes evaluating every-second schedules while
the one holding the evaluators' lease is killed and frozen; checked by SCH-1 and SCH-2
(``checker``) with every other invariant."""

from __future__ import annotations

import signal
import time
from pathlib import Path

from cairnq.extensions.schedules._scheduler import LEASE_NAME

from .._db import Database
from . import dbtools
from .checker import Report
from .harness import Config, Run

# (name, catch_up): a failover (the lease's 5 s) is caught up by "tick", missed by "short".
SCHEDULES = (("tick", "1m"), ("short", "2s"))
PAYLOAD = {"mode": "ok", "sleep_ms": [5, 20]}


def _start(run: Run) -> int:
    """A worker named after its index, so the lease's holder names its process."""
    return run.start_worker(worker_id=f"sched-{run._next_worker}")


def _holder(run: Run) -> int:
    """The index of the live worker holding the evaluators' lease, else any live one."""
    rows = dbtools._rows(run.db, f"select holder from cairnq_locks where name = '{LEASE_NAME}'")
    alive = run.live_workers()
    if rows and rows[0]["holder"].startswith("sched-"):
        index = int(rows[0]["holder"].split("-")[1])
        if index in alive:
            return index
    return run.rng.choice(alive)


def schedules_run(db: Database, folder: Path, mutant: str | None) -> Report:
    """Three workers on two every-second schedules. The lease holder is killed with
    ``kill -9`` three times (a fresh worker replaces it), then frozen past its lease and
    resumed; after a calm spell the schedules are paused and the workers drain."""
    run = Run(db, folder, Config(workers=0, clients=0, mutant=mutant, quiescence_s=30, seed=17))
    try:
        with db.sync_client() as client:
            for name, catch_up in SCHEDULES:
                client.schedules.add(name, "job", every="1s", catch_up=catch_up, payload=PAYLOAD)
        for _ in range(3):
            _start(run)
        for _ in range(3):
            time.sleep(run.rng.uniform(1.0, 2.0))
            run.kill_worker(_holder(run))
            _start(run)
        frozen = _holder(run)
        run.signal_worker(frozen, signal.SIGSTOP)
        time.sleep(6.0)
        run.signal_worker(frozen, signal.SIGCONT)
        time.sleep(2.0)
        with db.sync_client() as client:
            for name, _ in SCHEDULES:
                client.schedules.pause(name)
        run.quiesce()
    finally:
        run.stop()
    decided = dbtools.schedules(db)
    assert decided is not None
    for name, _ in SCHEDULES:
        slots = sum(row["slots"] for row in decided["slots"] if row["schedule"] == name)
        assert slots >= 5, f"the scenario never reached its state: {name!r} decided {slots} slots"
    return run.check()
