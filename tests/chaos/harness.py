"""Runs a workload of real processes against one database, injects faults, checks the history.

A run: install the transition log; start worker and client processes (each
writing a history); apply faults while clients submit; then quiescence (healthy
workers until every task is finished, or a bound); collect everything and run
the checker. A run that went through quiescence promises every task ended
(INV-2): if the bound passes first, the check fails and names the stuck rows.
"""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from cairnq import SyncCairnQ

from .._db import Database
from . import dbtools
from .checker import History, Report, check
from .history import load

ROOT = Path(__file__).resolve().parents[2]


@dataclass
class Config:
    workers: int = 3
    concurrency: int = 4
    lease_ms: int = 1000
    heartbeat_ms: int | None = None
    poll_ms: int = 100
    recovery_ms: int = 200
    clients: int = 2
    tasks_per_client: int = 50
    keys: int = 0
    mix: tuple[int, ...] = (8, 1, 1, 1)
    sleep_ms: tuple[int, int] = (5, 50)
    max_attempts: int = 3
    seed: int = 1
    mutant: str | None = None
    worker_id: str | None = None
    quiescence_s: float = 60.0
    allow_busy_errors: bool = True
    busy_ms: int | None = None
    op_timeout_s: float | None = None
    worker_env: dict[str, str] = field(default_factory=dict)
    # Further worker settings for every worker the run starts (queues, limit, ...).
    worker_options: dict[str, Any] = field(default_factory=dict)


class Run:
    """One chaos run on ``db``; keep the object to inspect processes and histories."""

    def __init__(self, db: Database, folder: Path, config: Config) -> None:
        self.db = db
        self.folder = folder
        self.config = config
        self.rng = random.Random(config.seed)
        self.workers: dict[int, subprocess.Popen[bytes]] = {}
        self.clients: list[subprocess.Popen[bytes]] = []
        self.faults: list[str] = []
        self._next_worker = 0
        self.quiesced: bool | None = None
        dbtools.install_transition_log(db)

    # --- processes ---------------------------------------------------------------------

    def _spec(self, through: Database | None = None) -> dict[str, Any]:
        spec: dict[str, Any] = json.loads((through or self.db).spec())
        spec["busy_ms"] = self.config.busy_ms
        spec["op_timeout_s"] = self.config.op_timeout_s
        return spec

    def _spawn(
        self, role: str, config: dict[str, Any], env: dict[str, str] | None = None
    ) -> subprocess.Popen[bytes]:
        with open(self.folder / f"{role}-{time.monotonic_ns()}.log", "wb") as log:
            return subprocess.Popen(
                [sys.executable, "-m", "tests.chaos.programs", role, json.dumps(config)],
                cwd=ROOT,
                env={**os.environ, **(env or {})},
                stdout=subprocess.DEVNULL,
                stderr=log,
                start_new_session=True,
            )

    def start_worker(
        self,
        *,
        env: dict[str, str] | None = None,
        through: Database | None = None,
        **overrides: Any,
    ) -> int:
        """Start a worker process; ``through`` connects it by another route (a proxy)."""
        index = self._next_worker
        self._next_worker += 1
        c = self.config
        config = {
            "db": self._spec(through),
            "history": str(self.folder / f"worker-{index}.jsonl"),
            "concurrency": c.concurrency,
            "lease_ms": c.lease_ms,
            "heartbeat_ms": c.heartbeat_ms,
            "poll_ms": c.poll_ms,
            "recovery_ms": c.recovery_ms,
            "seed": c.seed,
            "mutant": c.mutant,
            "worker_id": c.worker_id,
            **c.worker_options,
            **overrides,
        }
        self.workers[index] = self._spawn("worker", config, {**c.worker_env, **(env or {})})
        return index

    def start_clients(self, **overrides: Any) -> None:
        c = self.config
        for index in range(c.clients):
            config = {
                "db": self._spec(),
                "history": str(self.folder / f"client-{len(self.clients)}.jsonl"),
                "count": c.tasks_per_client,
                "keys": c.keys,
                "mix": list(c.mix),
                "sleep_ms": list(c.sleep_ms),
                "max_attempts": c.max_attempts,
                "seed": c.seed + index,
                "mutant": c.mutant,
                **overrides,
            }
            self.clients.append(self._spawn("client", config))

    def worker_stopped(self, index: int) -> bool:
        """Whether worker ``index``'s process is stopped (SIGSTOP, or at its pause point)."""
        try:
            stat = Path(f"/proc/{self.workers[index].pid}/stat").read_text()
        except OSError:
            return False
        return stat.rsplit(")", 1)[1].split()[0] == "T"

    def signal_worker(self, index: int, sig: int) -> bool:
        """Signal a live worker's process group; whether it was alive to receive it."""
        proc = self.workers[index]
        if proc.poll() is not None:
            return False
        try:
            os.killpg(proc.pid, sig)
        except ProcessLookupError:
            return False
        self.faults.append(f"{signal.Signals(sig).name} worker {index}")
        return True

    def kill_worker(self, index: int) -> None:
        self.signal_worker(index, signal.SIGKILL)
        self.workers[index].wait()

    def live_workers(self) -> list[int]:
        return [i for i, p in self.workers.items() if p.poll() is None]

    def wait_clients(self, timeout: float = 120) -> None:
        deadline = time.monotonic() + timeout
        for proc in self.clients:
            proc.wait(timeout=max(1.0, deadline - time.monotonic()))

    # --- faults ------------------------------------------------------------------------

    def kill_randomly(self, duration_s: float, every_s: tuple[float, float] = (0.5, 1.5)) -> None:
        """SIGKILL a random live worker every so often, starting a fresh one each time."""
        deadline = time.monotonic() + duration_s
        while time.monotonic() < deadline:
            time.sleep(self.rng.uniform(*every_s))
            alive = self.live_workers()
            if alive:
                self.kill_worker(self.rng.choice(alive))
                self.start_worker()

    # --- ending ------------------------------------------------------------------------

    def quiesce(self, *, keep_workers: int = 1) -> bool:
        """Faults over: keep ``keep_workers`` healthy workers until nothing is live and no
        batch is closed (a batch whose last member lease recovery ended waits for the
        batch sweep, whose named lease a killed worker may hold a while).

        From here on the run promises liveness: ``check`` fails on any task still
        live, whether or not it got there within ``quiescence_s``.
        """
        while len(self.live_workers()) < keep_workers:
            self.start_worker(env={"CAIRNQ_CRASHPOINT": "", "CAIRNQ_PAUSEPOINT": ""}, mutant=None)
        deadline = time.monotonic() + self.config.quiescence_s
        self.quiesced = False
        with self.db.sync_client() as client:
            while time.monotonic() < deadline:
                stats = client.stats()
                live = sum(s["queued"] + s["running"] for s in stats.values())
                if live == 0 and not dbtools.undone_batches(self.db):
                    self.quiesced = True
                    break
                time.sleep(0.2)
        return self.quiesced

    def stop(self) -> None:
        for index in self.live_workers():
            self.signal_worker(index, signal.SIGTERM)
        for proc in self.workers.values():
            try:
                proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
        for proc in self.clients:
            if proc.poll() is None:
                proc.kill()
                proc.wait()

    def check(self) -> Report:
        """Collect the run's histories and check them; liveness if the run quiesced."""
        history = History(
            transitions=dbtools.transitions(self.db, workflows=True),
            events=load(sorted(self.folder.glob("*.jsonl"))),
            final=dbtools.snapshot(self.db),
            integrity=dbtools.integrity(self.db),
            liveness=self.quiesced is not None,
            allow_busy_errors=self.config.allow_busy_errors,
            effects=dbtools.effects(self.db) if self.db.kind == "postgres" else None,
            schedules=dbtools.schedules(self.db),
            batches=dbtools.batches(self.db),
        )
        report = check(history)
        report.counters["faults"] = len(self.faults)
        report.counters["quiescent"] = self.quiesced
        (self.folder / "report.txt").write_text(report.summary() + "\n")
        return report


def run_standard(
    db: Database, folder: Path, config: Config, *, fault: Any = None, fault_s: float = 5.0
) -> Report:
    """Workers + clients, an optional fault function ``fault(run, seconds)``, quiescence, check."""
    run = Run(db, folder, config)
    try:
        for _ in range(config.workers):
            run.start_worker()
        run.start_clients()
        if fault is not None:
            fault(run, fault_s)
        run.wait_clients()
        run.quiesce()
    finally:
        run.stop()
    return run.check()


def submit_plain(db: Database, count: int, **options: Any) -> list[str]:
    """Submit ``count`` jobs from the test process (recorded as accepted)."""
    with SyncCairnQ(db.backend()) as client:
        return [client.submit("job", {"n": i, **options}).id for i in range(count)]
