"""The checker has teeth: each deliberately broken build is caught, the real build is not.

Each mutant (``programs.MUTANTS``) runs the scenario that exposes it and must
be reported by the invariant that checks the guarantee it breaks; the same
scenario on the real build is the control and must come out valid, on every
backend. ``docs/guarantees.md`` lists which guarantee each mutant breaks.
"""

from __future__ import annotations

import signal
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from cairnq import SyncCairnQ
from cairnq.protocol.steps import NOW, Call

from .._db import Database
from . import dbtools
from .checker import Report
from .harness import Config, Run
from .history import load
from .schedules import schedules_run
from .test_sqlite_faults import fill, tmpfs
from .test_storms import claim_storm, keyed_storm

pytestmark = [pytest.mark.chaos, pytest.mark.mutants, pytest.mark.slow]

Scenario = Callable[[Database, Path, "str | None"], Report]


def _until(condition: Callable[[], bool], what: str, timeout: float = 30) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, f"the scenario never reached its state: {what}"
        time.sleep(0.005)


def _running_tasks(client: SyncCairnQ) -> list[Any]:
    return client.list(status="running", limit=1000)


def _finish(run: Run) -> Report:
    run.quiesce()
    run.stop()
    return run.check()


# --- scenarios ------------------------------------------------------------------------------


ZOMBIE_CONFIG = {
    "workers": 0,
    "clients": 1,
    "tasks_per_client": 6,
    "mix": (1, 0, 0, 0),
    "sleep_ms": (300, 350),
    "lease_ms": 400,
    "heartbeat_ms": 100,
    "worker_id": "shared-worker",
    "seed": 5,
}


RESCUE_HOLD_MS = 2000
"""How long the rescuer's runs last at least: the zombie's stale settlement must land while
they run (a test process starved for a few hundred milliseconds on a loaded machine could
otherwise miss runs of 300 ms, and a settlement landing after them would find nothing to
overwrite)."""


def _freeze_a_settling_zombie(run: Run) -> int:
    """A worker that claims every task and freezes itself as its first settlement is sent."""
    run.start_clients()
    run.wait_clients()
    env = {
        "CAIRNQ_PAUSEPOINT": "before_write:complete_many",
        "CAIRNQ_PAUSEPOINT_RESUME": str(run.folder / "resume"),
    }
    zombie = run.start_worker(concurrency=6, env=env)
    _until(lambda: run.worker_stopped(zombie), "the zombie froze before its settlement")
    return zombie


def _settled(run: Run, zombie: int) -> bool:
    """Whether the zombie recorded how its frozen settlement came out."""
    path = run.folder / f"worker-{zombie}.jsonl"
    outcomes = ("settle_ok", "settle_lost", "settle_info")
    return path.exists() and any(e["event"] in outcomes for e in load([path]))


def _resume(run: Run, zombie: int) -> None:
    """Let the zombie go on, and wait until its frozen settlement has reached the database."""
    (run.folder / "resume").touch()
    run.signal_worker(zombie, signal.SIGCONT)
    _until(lambda: _settled(run, zombie), "the zombie's settlement came back")


def _stale_writer_run(db: Database, folder: Path, mutant: str | None) -> Report:
    """Two processes share a worker id. One freezes after every local check, just before its
    settlement's statement; the other takes the tasks over (attempt 2) once the leases
    expire. Resumed, the frozen settlement reaches the database, which must refuse it."""
    run = Run(db, folder, Config(**ZOMBIE_CONFIG, max_attempts=3, mutant=mutant))  # type: ignore[arg-type]
    try:
        zombie = _freeze_a_settling_zombie(run)
        run.start_worker(concurrency=6, hold_ms=RESCUE_HOLD_MS)
        with db.sync_client() as client:
            _until(
                lambda: sum(t.attempt == 2 for t in _running_tasks(client)) >= 3,
                "the rescuer claimed attempt 2",
            )
        _resume(run, zombie)
    except BaseException:
        run.stop()
        raise
    return _finish(run)


def _reset_retry_run(db: Database, folder: Path, mutant: str | None) -> Report:
    """As the stale writer, but the tasks fail for good (max_attempts=1), are retried with
    ``reset_attempt=True`` and claimed again by the same worker id at attempt 1: only the
    claim's nonce tells the frozen claim from the new one."""
    run = Run(db, folder, Config(**ZOMBIE_CONFIG, max_attempts=1, mutant=mutant))  # type: ignore[arg-type]
    try:
        zombie = _freeze_a_settling_zombie(run)
        run.start_worker(concurrency=6, hold_ms=RESCUE_HOLD_MS)
        with db.sync_client() as client:
            _until(lambda: client.stats()["default"]["failed"] == 6, "recovery failed the tasks")
            for task in client.list(status="failed"):
                client.retry(task.id, reset_attempt=True)
            _until(
                lambda: sum(t.attempt == 1 for t in _running_tasks(client)) >= 3,
                "the rescuer claimed attempt 1 again",
            )
        _resume(run, zombie)
    except BaseException:
        run.stop()
        raise
    return _finish(run)


def _canceled_then_crashed_run(db: Database, folder: Path, mutant: str | None) -> Report:
    """Running tasks get a cancel request, then their worker dies; recovery must cancel them
    (their 3 s runs outlast the requests and the kill by far)."""
    config = Config(
        workers=0,
        clients=1,
        tasks_per_client=5,
        mix=(1, 0, 0, 0),
        sleep_ms=(3000, 3000),
        lease_ms=500,
        heartbeat_ms=100,
        mutant=mutant,
    )
    run = Run(db, folder, config)
    try:
        run.start_clients()
        run.wait_clients()
        doomed = run.start_worker(concurrency=5)
        with db.sync_client() as client:
            _until(lambda: len(_running_tasks(client)) == 5, "five tasks running")
            for task in _running_tasks(client):
                client.cancel(task.id)
        run.kill_worker(doomed)
        run.start_worker(concurrency=5)
    except BaseException:
        run.stop()
        raise
    return _finish(run)


def _stuck_handlers_run(db: Database, folder: Path, mutant: str | None) -> Report:
    """Async handlers that never check for a cancel (3 s runs) are canceled as they run,
    on a worker whose grace period is 200 ms: each is stopped, and its attempt ends
    canceled."""
    config = Config(
        workers=0, clients=0, lease_ms=1000, heartbeat_ms=100, mutant=mutant, quiescence_s=10
    )
    run = Run(db, folder, config)
    try:
        with db.sync_client() as client:
            for n in range(4):
                client.submit("job", {"n": n, "mode": "ignore_cancel", "stuck_s": 3.0})
            run.start_worker(concurrency=4, cancel_grace_ms=200)
            _until(lambda: len(_running_tasks(client)) == 4, "four tasks running")
            for task in _running_tasks(client):
                client.cancel(task.id)
    except BaseException:
        run.stop()
        raise
    return _finish(run)


def _long_tasks_run(db: Database, folder: Path, mutant: str | None) -> Report:
    """Tasks that run for several heartbeats on two workers, their leases renewed."""
    config = Config(
        workers=2,
        concurrency=3,
        clients=1,
        tasks_per_client=12,
        mix=(1, 0, 0, 0),
        sleep_ms=(300, 600),
        lease_ms=1000,
        mutant=mutant,
        quiescence_s=20,
    )
    return _standard(db, folder, config)


def _standard(db: Database, folder: Path, config: Config, **client: Any) -> Report:
    run = Run(db, folder, config)
    try:
        for _ in range(config.workers):
            run.start_worker()
        run.start_clients(**client)
        run.wait_clients()
    except BaseException:
        run.stop()
        raise
    return _finish(run)


def _retries_run(db: Database, folder: Path, mutant: str | None) -> Report:
    """Tasks that fail retryably on every attempt must end failed at max_attempts."""
    config = Config(
        workers=1,
        clients=1,
        tasks_per_client=6,
        mix=(0, 0, 0, 0, 1),
        max_attempts=2,
        mutant=mutant,
        quiescence_s=4,
    )
    return _standard(db, folder, config)


def _purge_run(db: Database, folder: Path, mutant: str | None) -> Report:
    """A client purges finished tasks older than 400 ms while it submits and a worker runs."""
    config = Config(
        workers=1, clients=1, tasks_per_client=60, mix=(1, 0, 0, 0), sleep_ms=(5, 20), mutant=mutant
    )
    return _standard(db, folder, config, gap_ms=20, purge_every=10, purge_older_than_ms=400)


def _mixed_run(db: Database, folder: Path, mutant: str | None) -> Report:
    """A small mixed workload on two workers: successes, retries, failures, cancels."""
    config = Config(
        workers=2, clients=2, tasks_per_client=20, mutant=mutant, quiescence_s=8, seed=13
    )
    return _standard(db, folder, config)


def _sync_timeout_run(db: Database, folder: Path, mutant: str | None) -> Report:
    """Plain ``def`` handlers run past ``max_run_ms`` on two workers with free slots."""
    config = Config(workers=0, clients=0, lease_ms=1000, heartbeat_ms=200, mutant=mutant)
    run = Run(db, folder, config)
    try:
        with db.sync_client() as client:
            for n in range(3):
                client.submit("sync_job", {"n": n, "sleep_s": 0.9}, max_attempts=2)
        for _ in range(2):
            run.start_worker(concurrency=3, max_run_ms=300, backoff_ms=0, backoff_max_ms=0)
    except BaseException:
        run.stop()
        raise
    return _finish(run)


def _effects_run(db: Database, folder: Path, mutant: str | None) -> Report:
    """Handlers settle with ``succeed_in`` (an effect row in the same transaction) while
    the client cancels half of the tasks as they run: each handler watches for a cancel
    for 0.6 s before settling, longer than a claim takes even on a loaded machine, so a
    cancel sent within 0.3 s of the submit lands on a running attempt."""
    config = Config(
        workers=2,
        clients=1,
        tasks_per_client=16,
        mix=(0, 0, 0, 0, 0, 0, 1),
        sleep_ms=(5, 20),
        mutant=mutant,
    )
    return _standard(
        db, folder, config, cancel_p=0.5, cancel_after_s=0.3, wait_cancel_polls=60, gap_ms=20
    )


def _nasty_errors_run(db: Database, folder: Path, mutant: str | None) -> Report:
    """Handlers raise errors holding NUL and lone surrogates among ordinary tasks."""
    config = Config(
        workers=1,
        clients=1,
        tasks_per_client=20,
        mix=(1, 0, 0, 0, 0, 1),
        max_attempts=2,
        mutant=mutant,
        quiescence_s=10,
    )
    return _standard(db, folder, config)


def _full_disk_run(db: Database, folder: Path, mutant: str | None) -> Report:
    """The disk fills under a worker with queued work for 3 s, then space returns.

    Its own database on a small tmpfs (``db`` only says the backend).
    """
    with tmpfs(folder / "small", "3m") as disk:
        small = Database.sqlite(disk / "q.db")
        run = Run(small, folder, Config(workers=0, clients=0, poll_ms=100, mutant=mutant))
        try:
            index = run.start_worker()
            with small.sync_client() as client:
                first = client.submit("job", {"n": -1})
                assert client.wait(first.id, timeout_ms=30_000).status == "succeeded"
                run.signal_worker(index, signal.SIGSTOP)
                for i in range(10):
                    client.submit("job", {"n": i, "blob": "x" * 20_000})
            freed = disk / "freed"
            freed.write_bytes(b"\0" * 512 * 1024)
            fill(disk / "ballast")
            run.signal_worker(index, signal.SIGCONT)
            time.sleep(3.0)
            freed.unlink()
            run.quiesce()
        finally:
            run.stop()
        report = run.check()
        small.close_all()
    return report


def _claim_storm_run(db: Database, folder: Path, mutant: str | None) -> Report:
    """Fifty claimers (5 processes x 10) fire at one queued task, round after round
    (``test_storms.claim_storm``; its control is ``test_storms``' fifty claimers test)."""
    return claim_storm(db, folder, mutant).check()


def _keyed_storm_run(db: Database, folder: Path, mutant: str | None) -> Report:
    """Five processes submit the same 5 keys, ten times each, at one instant
    (``test_storms.keyed_storm``; its control is ``test_storms``' keyed submits test)."""
    return keyed_storm(db, folder, "reuse", mutant).check()


def _busy_storm_run(db: Database, folder: Path, mutant: str | None) -> Report:
    """The keyed storm with forty submits per key and process (1,000 in all): whether
    the processes' write transactions meet depends on how a loaded machine schedules
    them, and the longer storm gives them the time to."""
    return keyed_storm(db, folder, "reuse", mutant, per_key=40).check()


def _unique_storm_run(db: Database, folder: Path, mutant: str | None) -> Report:
    """Five processes, started at one instant, each submit the same 5 keys with
    ``unique_for``: the keys side by side, each key's ten submits in turn, each after
    canceling the task the one before got, so only the period keeps a submit from
    inserting (``test_storms.keyed_storm``; its control is ``test_storms``' unique
    submits test)."""
    return keyed_storm(db, folder, "reuse", mutant, unique_for_ms=600_000).check()


def _has_started(folder: Path, index: int) -> bool:
    """Whether worker ``index`` of a run in ``folder`` has recorded its start."""
    history = folder / f"worker-{index}.jsonl"
    return history.exists() and '"worker_started"' in history.read_text()


def _submit_limited(folder: Path, client: SyncCairnQ, started: list[int], count: int) -> None:
    """Once every worker process in ``started`` runs, ``count`` tasks of 20-60 ms over the
    limit keys ``c0`` to ``c2``. (A process that started late, on a loaded machine, would
    otherwise find the first one had drained the queue alone.)"""
    _until(
        lambda: all(_has_started(folder, index) for index in started),
        "every worker process started",
        timeout=60,
    )
    client.submit_many(
        [
            {"task": "job", "payload": {"customer": f"c{i % 3}", "sleep_ms": [20, 60]}}
            for i in range(count)
        ]
    )


def _until_succeeded(client: SyncCairnQ, count: int) -> None:
    _until(
        lambda: client.stats().get("default", {}).get("succeeded", 0) == count,
        f"all {count} tasks succeeded",
        timeout=60,
    )


def _limited_run(db: Database, folder: Path, mutant: str | None) -> Report:
    """Three worker processes with 4 slots each share a limit of 2 running per key over
    3 keys: 6 may run at once in all, though the processes have room for 12."""
    run = Run(db, folder, Config(workers=0, clients=0, mutant=mutant))
    try:
        with db.sync_client() as client:
            started = [run.start_worker(concurrency=4, poll_ms=20, limit=2) for _ in range(3)]
            _submit_limited(folder, client, started, 90)
            _until_succeeded(client, 90)
    except BaseException:
        run.stop()
        raise
    return _finish(run)


def _limited_beside_reference_run(db: Database, folder: Path, mutant: str | None) -> Report:
    """Two worker processes with 4 slots each share a limit of 2 running per key over 3
    keys, beside a worker claiming as a reference SDK's does (bare claims, no limits): it
    takes limited tasks freely, and recovers and settles tasks the limited workers
    claimed, one of which is killed with ``kill -9`` while it holds a task. The limited
    workers' own runs stay within the limit (a task the reference worker holds counts
    against its key only if a limited claim recorded it), and every task ends: nothing
    the reference worker settles or recovers keeps a key's place taken."""
    run = Run(db, folder, Config(workers=0, clients=0, mutant=mutant))
    try:
        with db.sync_client() as client:
            victim = run.start_worker(concurrency=4, poll_ms=20, limit=2, worker_id="lim-0")
            started = [
                victim,
                run.start_worker(concurrency=4, poll_ms=20, limit=2, worker_id="lim-1"),
                run.start_worker(concurrency=2, poll_ms=20, reference=True, worker_id="ref"),
            ]
            _submit_limited(folder, client, started, 120)
            _kill_while_holding(
                run,
                db,
                victim,
                "lim-0",
                lambda name: run.start_worker(concurrency=4, poll_ms=20, limit=2, worker_id=name),
            )
            _until_succeeded(client, 120)
    except BaseException:
        run.stop()
        raise
    report = _finish(run)
    assert report.counters["recoveries"] >= 1, report.summary()
    # Its claims wrote the bare worker id, as a reference SDK worker's do.
    settled_bare = dbtools._rows(db, "select id from cairnq_tasks where worker_id = 'ref'")
    assert settled_bare, "the reference worker settled no task under its bare id"
    return report


def _expiry_run(db: Database, folder: Path, mutant: str | None) -> Report:
    """One worker, one slot, a burst of tasks that may wait 300 ms to start: the later
    ones expire in the queue (the policies marked in use before the worker starts)."""
    with db.sync_client() as client:
        client.backend.run(_policies_in_use(), write=True)
    config = Config(
        workers=1,
        concurrency=1,
        clients=1,
        tasks_per_client=24,
        mix=(1, 0, 0, 0),
        sleep_ms=(40, 60),
        mutant=mutant,
        quiescence_s=6,
    )
    return _standard(db, folder, config, expires_in_ms=300, gap_ms=1)


def _policies_in_use() -> Any:
    yield Call("policies_mark", {"now_ms": NOW, "activation_ms": 0})


def _workflows_run(db: Database, folder: Path, mutant: str | None) -> Report:
    """Two workers run eight graphs (a diamond whose branches take different times, its
    dependents under each policy in turn, then a task after it due 1.5 s after its
    release), four parents gathering two to four children that end at different times,
    and four tasks of durable steps replayed after a failure. A diamond's slow branch, and
    every gathered child but the first, runs longer than a workflow sweep's interval:
    whether or not a settlement decides the parked task (the workflows' ``in_use`` gate),
    a sweep decides it while one dependency has succeeded and another still runs. The
    workers have a slot for every task that can run at once, so a task released too
    early is claimed at once, before the dependency still running ends."""
    config = Config(
        workers=2,
        concurrency=16,
        clients=1,
        tasks_per_client=16,
        mutant=mutant,
        quiescence_s=12,
        seed=23,
    )
    return _standard(
        db,
        folder,
        config,
        cycle=["graph", "gather", "graph", "steps"],
        graph_delay_ms=1500,
        graph_slow_ms=[1200, 1500],
        gather_slow_ms=[1200, 1500],
    )


def _purged_dependencies_run(db: Database, folder: Path, mutant: str | None) -> Report:
    """Two workers run twelve graphs (a diamond whose one branch is fast and the other
    slow, then a task after it; the policies in turn) while the client purges every
    finished task every 25 ms: a fast branch is often purged once it succeeded, while its
    dependent still waits on the slow one."""
    config = Config(
        workers=2,
        concurrency=4,
        clients=1,
        tasks_per_client=12,
        mutant=mutant,
        quiescence_s=12,
        seed=31,
    )
    return _standard(db, folder, config, cycle=["graph"], gap_ms=100, graph_purge_every_ms=25)


def _kill_while_holding(
    run: Run, db: Database, victim: int, name: str, start: Callable[[str], int]
) -> None:
    """Kill worker ``victim`` (its id ``name``) with ``kill -9`` while it holds a task.

    A task seen running may have ended before the signal, so until one is still held
    after the kill, a fresh victim (``start(name + "0")``, then one more zero) is
    started and killed, at most five in all.
    """
    for _ in range(5):
        held = f"select id from cairnq_tasks where status = 'running' and worker_id like '{name}#%'"
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and not dbtools._rows(db, held):
            time.sleep(0.01)
        run.kill_worker(victim)
        if dbtools._rows(db, held):
            return
        name += "0"
        victim = start(name)


def _batches_run(db: Database, folder: Path, mutant: str | None) -> Report:
    """Two workers run sixteen batches of three to six members (one in eight failing for
    good; half submitted open, given a last member and closed) with all three callbacks.
    A second into the run one worker is killed with ``kill -9`` while it holds a task,
    and a fresh one started: the members it held end by lease recovery, which records
    no outcome, so the batch sweep records them and decides their batches."""
    config = Config(
        workers=0,
        concurrency=8,
        clients=1,
        tasks_per_client=16,
        mutant=mutant,
        quiescence_s=10,
        seed=41,
    )
    run = Run(db, folder, config)
    try:
        victim = run.start_worker(worker_id="batch-0")
        run.start_worker(worker_id="batch-1")
        run.start_clients(cycle=["batch"], gap_ms=60, batch_sleep_ms=[20, 150])
        time.sleep(1.0)
        # Its members then end by lease recovery.
        _kill_while_holding(
            run, db, victim, "batch-0", lambda name: run.start_worker(worker_id=name)
        )
        run.start_worker(worker_id="batch-2")
        run.wait_clients()
    except BaseException:
        run.stop()
        raise
    report = _finish(run)
    assert report.counters["batches_done"] >= 12, report.summary()
    assert report.counters["recoveries"] >= 1, report.summary()
    return report


# mutant -> (scenario, invariants that must report it, the backend CI runs it on)
MUTANTS: dict[str, tuple[Scenario, set[str], tuple[str, ...]]] = {
    "no_fence": (_stale_writer_run, {"INV-4", "INV-5"}, ("sqlite", "postgres")),
    "claim_without_nonce": (_reset_retry_run, {"INV-4", "INV-5"}, ("sqlite", "postgres")),
    "nonce_repeated": (_reset_retry_run, {"INV-4", "INV-5"}, ("sqlite", "postgres")),
    "recover_ignores_cancel": (_canceled_then_crashed_run, {"INV-8"}, ("sqlite",)),
    "recover_live_leases": (_long_tasks_run, {"INV-4", "INV-7"}, ("postgres",)),
    "retries_unbounded": (_retries_run, {"INV-10"}, ("sqlite",)),
    "purge_ignores_cutoff": (_purge_run, {"INV-15"}, ("postgres",)),
    "keys_unseen": (_keyed_storm_run, {"INV-9"}, ("postgres",)),
    "deferred": (_busy_storm_run, {"E2"}, ("sqlite",)),
    "periods_unseen": (_unique_storm_run, {"INV-20"}, ("sqlite", "postgres")),
    "claim_without_fence": (_claim_storm_run, {"INV-6"}, ("postgres",)),
    "thread_outlives_timeout": (_sync_timeout_run, {"INV-7"}, ("sqlite",)),
    "leaves_one_running": (_mixed_run, {"INV-2"}, ("postgres",)),
    "acks_without_writing": (_mixed_run, {"INV-1"}, ("sqlite",)),
    "refuses_after_writing": (_mixed_run, {"INV-1b"}, ("postgres",)),
    "unwritable_errors": (_nasty_errors_run, {"INV-17"}, ("postgres",)),
    "no_error_backoff": (_full_disk_run, {"INV-14"}, ("sqlite",)),
    "stop_succeeds": (_stuck_handlers_run, {"INV-19"}, ("sqlite", "postgres")),
    "never_stopped": (_stuck_handlers_run, {"INV-19"}, ("postgres",)),
    "succeed_in_ignores_cancel": (_effects_run, {"INV-11"}, ("postgres",)),
    "slots_unguarded": (schedules_run, {"SCH-1"}, ("postgres",)),
    "catch_up_in_seconds": (schedules_run, {"SCH-2"}, ("sqlite",)),
    "limit_per_process": (_limited_run, {"INV-18"}, ("sqlite", "postgres")),
    "limit_unlocked": (_limited_run, {"INV-18"}, ("postgres",)),
    "release_ignores_a_dependency": (_workflows_run, {"WF-1"}, ("sqlite",)),
    "sweep_decides_twice": (_workflows_run, {"WF-2"}, ("postgres",)),
    "gather_resumes_early": (_workflows_run, {"WF-3"}, ("sqlite",)),
    "purged_success_forgotten": (_purged_dependencies_run, {"WF-4"}, ("postgres",)),
    "batch_fires_early": (_batches_run, {"BAT-1"}, ("sqlite", "postgres")),
    "ignores_expiry": (_expiry_run, {"INV-21"}, ("sqlite", "postgres")),
}
# scenario -> the backends it exists on (succeed_in is PostgreSQL's). The storms' controls
# are ``test_storms``' tests of the same storms on the real build, which check more.
CONTROLS: dict[Scenario, tuple[str, ...]] = {
    _stale_writer_run: ("sqlite", "postgres"),
    _reset_retry_run: ("sqlite", "postgres"),
    _canceled_then_crashed_run: ("sqlite", "postgres"),
    _long_tasks_run: ("sqlite", "postgres"),
    _stuck_handlers_run: ("sqlite", "postgres"),
    _retries_run: ("sqlite", "postgres"),
    _purge_run: ("sqlite", "postgres"),
    _sync_timeout_run: ("sqlite", "postgres"),
    _mixed_run: ("sqlite", "postgres"),
    _effects_run: ("postgres",),
    _nasty_errors_run: ("sqlite", "postgres"),
    _full_disk_run: ("sqlite",),
    schedules_run: ("sqlite", "postgres"),
    _limited_run: ("sqlite", "postgres"),
    _limited_beside_reference_run: ("sqlite", "postgres"),
    _workflows_run: ("sqlite", "postgres"),
    _purged_dependencies_run: ("sqlite", "postgres"),
    _batches_run: ("sqlite", "postgres"),
    _expiry_run: ("sqlite", "postgres"),
    _busy_storm_run: ("sqlite",),
}


def _cases(backends_of: dict[Any, tuple[str, ...]]) -> list[Any]:
    return [
        pytest.param(
            item,
            backend,
            id=f"{getattr(item, '__name__', item).strip('_')}-{backend}",
            marks=[pytest.mark.postgres] if backend == "postgres" else [],
        )
        for item, backends in backends_of.items()
        for backend in backends
    ]


def _database(request: pytest.FixtureRequest, backend: str) -> Database:
    db: Database = request.getfixturevalue("sqlite_db" if backend == "sqlite" else "pg_db")
    return db


@pytest.mark.parametrize(("mutant", "backend"), _cases({m: v[2] for m, v in MUTANTS.items()}))
def test_the_checker_catches_the_mutant(
    request: pytest.FixtureRequest, tmp_path: Path, mutant: str, backend: str
) -> None:
    scenario, expected, _ = MUTANTS[mutant]
    report = scenario(_database(request, backend), tmp_path, mutant)
    assert not report.valid, f"mutant {mutant} went unnoticed:\n{report.summary()}"
    assert report.invariants() & expected, report.summary()


@pytest.mark.parametrize(("scenario", "backend"), _cases(CONTROLS))
def test_the_real_build_passes_the_scenario(
    request: pytest.FixtureRequest, tmp_path: Path, scenario: Scenario, backend: str
) -> None:
    report = scenario(_database(request, backend), tmp_path, None)
    assert report.valid, report.summary()
