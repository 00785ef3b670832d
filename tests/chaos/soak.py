"""The soak: every fault mixed on a random schedule for minutes, then the checker.

Run from the repository root (not part of CI)::

    python -m tests.chaos.soak --minutes 10 --backend sqlite --seed 1
    python -m tests.chaos.soak --minutes 10 --backend postgres --seed 1

The work: single tasks of every kind (``programs.MODES``: successes, retries,
failures, cancels, unstorable errors, ``succeed_in`` on PostgreSQL), graphs (a
diamond and a task after it, under random dependency policies, in their own queue,
whose finished tasks are purged at once every 100 ms), parents that
spawn and gather children, durable steps replayed after a failure, tasks under
a concurrency limit of 2 per customer (their own queue), and two every-second
schedules, paused before quiescence, batches with their three callbacks, and
tasks that sleep durably and then wait for an event their client sends (before or
after the wait begins, with an id, sometimes twice), checked by the waits'
invariants too (EV-1, EV-2, EV-3, SL-1: ``waits_checker``).

SQLite faults: kill -9 and SIGSTOP/SIGCONT of workers, a foreign process holding
the write lock past the busy budget. PostgreSQL (a private cluster started with
initdb): kill -9 and SIGSTOP of workers, sessions terminated, and the server
crashed (``pg_ctl stop -m immediate``) and restarted.

Writes a summary (JSON) to ``--out`` (default ``docs/soak/<backend>.json``): the
commit and machine it ran on, the faults that took effect, the outcomes and the
checker's verdict; ``python -m tests.chaos.soak_table`` renders the
Guarantees page's table (``docs/guarantees.md``) from the summaries. Prints one line of figures.
"""

from __future__ import annotations

import argparse
import contextlib
import datetime
import itertools
import json
import os
import platform
import random
import signal
import sqlite3
import subprocess
import sys
import tempfile
import time
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any

from .._db import Database, admin_connect
from . import dbtools
from .checker import LIVE, Violation, event_ident
from .harness import ROOT, Config, Run
from .history import WAIT_OPS, load
from .pgcluster import Cluster, _bin
from .programs import MODES
from .test_sqlite_faults import HOLD_LOCK
from .waits_checker import WaitsHistory, check_waits

# Seconds: between faults, a worker stays stopped, a foreign lock is held, the server stays down.
FAULT_GAP_S = (1.0, 3.0)
PAUSE_S = (0.5, 3.0)
LOCK_S = (0.5, 2.5)
CRASH_DOWN_S = (1.0, 3.0)
STUCK_ROWS_KEPT = 50
VIOLATIONS_KEPT = 200


def _redeliveries(events: list[dict[str, Any]]) -> tuple[list[float], list[float]]:
    """Runs of a task that started again although its previous run was never settled.

    Returns (windows, overlaps) in seconds: from the unsettled run's start to the
    next run's start, and how long the two ran at once (0 when the first had
    ended). A run after a recorded settlement (a retry after a failure, a gathering
    parent's run after its park) is not a redelivery. Runs are told apart by their
    claim (its nonce), and all times come from one host's monotonic clock, which
    every process shares.
    """
    starts: dict[tuple[Any, ...], float] = {}
    ends: dict[tuple[Any, ...], float] = {}
    settled: set[tuple[Any, ...]] = set()
    for event in events:
        claim = event_ident(event)
        if event["event"] == "handler_start":
            starts.setdefault(claim, event["t"])
        elif event["event"] == "handler_end":
            ends[claim] = event["t"]
        elif event["event"] == "settle_ok":
            settled.add(claim)
    runs: dict[Any, list[tuple[float, tuple[Any, ...]]]] = defaultdict(list)
    for claim, started in starts.items():
        runs[claim[0]].append((started, claim))
    windows, overlaps = [], []
    for ordered in runs.values():
        ordered.sort()
        for (started, claim), (following, _) in itertools.pairwise(ordered):
            if claim in settled:
                continue
            windows.append(following - started)
            ended = ends.get(claim)
            overlaps.append(max(0.0, ended - following) if ended is not None else 0.0)
    return windows, overlaps


# --- faults: each returns whether it took effect on a live process -------------------------


def _kill(run: Run, index: int) -> bool:
    """SIGKILL a worker; it took effect when the worker died of that very signal."""
    proc = run.workers[index]
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    return proc.returncode == -signal.SIGKILL


def _state(pid: int) -> str:
    """The kernel's one-letter state of ``pid`` (``T`` stopped, ``Z`` exited), ``""`` if gone."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return ""
    return stat.rsplit(")", 1)[1].split()[0]


def _pause(run: Run, index: int, seconds: float) -> bool:
    """SIGSTOP a worker for ``seconds``, then SIGCONT; it took effect if the worker stopped."""
    proc = run.workers[index]
    try:
        os.killpg(proc.pid, signal.SIGSTOP)
    except ProcessLookupError:
        return False
    deadline = time.monotonic() + 1.0
    stopped = False
    while time.monotonic() < deadline:
        stopped = _state(proc.pid) == "T"
        if stopped or proc.poll() is not None:
            break
        time.sleep(0.005)
    time.sleep(seconds)
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGCONT)
    return stopped


def _hold_lock(db: Database, seconds: float) -> bool:
    """A foreign process holds the SQLite write lock; it took effect if it got the lock."""
    done = subprocess.run(
        [sys.executable, "-c", HOLD_LOCK, str(db.path), str(seconds)],
        capture_output=True,
        text=True,
        check=False,
    )
    return done.returncode == 0 and done.stdout.startswith("locked")


def _terminate_sessions(db: Database) -> int:
    """Terminate every cairnq session; how many were terminated (0: no effect)."""
    import psycopg

    try:
        with admin_connect(db.url) as admin:
            rows = admin.execute(
                "select pg_terminate_backend(pid) from pg_stat_activity where "
                "application_name like 'cairnq-%' and pid <> pg_backend_pid()"
            ).fetchall()
    except psycopg.Error:
        return 0
    return sum(1 for (terminated,) in rows if terminated)


def _crash(cluster: Cluster, rng: random.Random) -> bool:
    """Crash the server, keep it down a while, restart it; it took effect if it was running."""
    try:
        cluster.crash()
    except subprocess.CalledProcessError:
        return False
    time.sleep(rng.uniform(*CRASH_DOWN_S))
    cluster.start()
    return True


# Each client purges finished tasks older than this every 25 submits (INV-15 checks the cutoff).
PURGE_OLDER_THAN_MS = 5000
# (name, catch_up) of the every-second schedules the workers evaluate (SCH-1, SCH-2).
SCHEDULES = (("soak-tick", "1m"), ("soak-short", "2s"))
SCHEDULE_PAYLOAD = {"mode": "ok", "sleep_ms": [5, 20]}
# Graphs run in their own queue, whose finished tasks each client purges this often, however
# recently they finished: a graph's fast branch is often purged while the task after both of
# its branches waits on the slow one (WF-4 holds that task to the purged branch's success).
GRAPH_QUEUE = "graphs"
GRAPH_PURGE_EVERY_MS = 100
# The queues workers serve, and the limited tasks' queue and limit: at most 2 running per
# payload.customer (INV-18).
LIMIT = {"queues": ["default", "limited", GRAPH_QUEUE], "limit": 2, "limit_queue": "limited"}
# A graph's last task is due this long after its release (WF-2 sees one release).
GRAPH_DELAY_MS = 300
GRAPH_CANCEL_P = 0.1


def _with_schedules(db: Database, paused: bool) -> None:
    """Add the soak's schedules, or pause them; retried while the database is away."""
    deadline = time.monotonic() + 60
    while True:
        try:
            with db.sync_client() as client:
                for name, catch_up in SCHEDULES:
                    if paused:
                        client.schedules.pause(name)
                    else:
                        client.schedules.add(
                            name,
                            "job",
                            every="1s",
                            catch_up=catch_up,
                            payload=SCHEDULE_PAYLOAD,
                            replace=True,
                        )
            return
        except Exception:
            if time.monotonic() > deadline:
                raise
            time.sleep(1.0)


# --- the run ---------------------------------------------------------------------------------


def soak(
    db: Database, folder: Path, minutes: float, seed: int, cluster: Cluster | None
) -> dict[str, Any]:
    """Run the soak on ``db``; returns its summary (see the module docstring)."""
    rng = random.Random(seed)
    config = Config(
        workers=3,
        concurrency=6,
        lease_ms=1500,
        heartbeat_ms=300,
        clients=2,
        tasks_per_client=10**6,
        keys=50,
        # ok, retried once, permanent failure, canceled while running, retried until it
        # fails, an error the database cannot store as it is, succeed_in (PostgreSQL),
        # a graph (five tasks), a gathering parent, durable steps, a limited task, a
        # batch (three to six members and their callbacks), a sleep and an event wait
        mix=(12, 2, 1, 2, 1, 1, 2 if db.kind == "postgres" else 0, 2, 2, 2, 3, 1, 2),
        sleep_ms=(5, 200),
        seed=seed,
        busy_ms=1000,
        quiescence_s=180,
        op_timeout_s=10.0,
        worker_options=LIMIT,
    )
    kinds = ["kill", "pause"] + (["lock"] if db.kind == "sqlite" else ["sessions", "crash"])
    started_at = datetime.datetime.now(datetime.timezone.utc)
    began = time.monotonic()
    run = Run(db, folder, config)
    chosen: Counter[str] = Counter()
    effective: Counter[str] = Counter()
    sessions_terminated = 0
    killed: set[int] = set()
    try:
        _with_schedules(db, paused=False)
        for _ in range(config.workers):
            run.start_worker()
        run.start_clients(
            gap_ms=40,
            purge_every=25,
            purge_older_than_ms=PURGE_OLDER_THAN_MS,
            retry_p=0.3,
            graph_delay_ms=GRAPH_DELAY_MS,
            graph_cancel_p=GRAPH_CANCEL_P,
            graph_queue=GRAPH_QUEUE,
            graph_purge_every_ms=GRAPH_PURGE_EVERY_MS,
            limit_queue=LIMIT["limit_queue"],
        )
        deadline = time.monotonic() + minutes * 60
        while time.monotonic() < deadline:
            time.sleep(rng.uniform(*FAULT_GAP_S))
            kind = rng.choice(kinds)
            chosen[kind] += 1
            alive = run.live_workers()
            took = False
            if kind == "kill" and alive:
                victim = rng.choice(alive)
                took = _kill(run, victim)
                killed.add(victim)
                run.start_worker()
            elif kind == "pause" and alive:
                took = _pause(run, rng.choice(alive), rng.uniform(*PAUSE_S))
            elif kind == "lock":
                took = _hold_lock(db, rng.uniform(*LOCK_S))
            elif kind == "sessions":
                terminated = _terminate_sessions(db)
                sessions_terminated += terminated
                took = terminated > 0
            elif kind == "crash" and cluster is not None:
                took = _crash(cluster, rng)
            effective[kind] += took
        faults_s = time.monotonic() - began
        exited = {
            str(i): p.returncode
            for i, p in run.workers.items()
            if i not in killed and p.poll() is not None
        }
        for proc in run.clients:
            proc.send_signal(signal.SIGTERM)
        for proc in run.clients:
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(timeout=10)
        _with_schedules(db, paused=True)
        run.quiesce(keep_workers=3)
    finally:
        run.stop()
    report = run.check()
    events = load(sorted(folder.glob("*.jsonl")))
    waits = _check_waits(db, events, quiescent=run.quiesced)
    windows, overlaps = _redeliveries(events)
    stuck = [
        {k: v for k, v in row.items() if k != "payload"}
        for row in dbtools.snapshot(db)
        if row["status"] in LIVE
    ]
    typed_errors = Counter(
        e.get("error")
        for e in events
        if e["event"] in ("submit_info", "submit_fail") and e.get("error") != "AlreadyExists"
    )
    key_conflicts = sum(e.get("error") == "AlreadyExists" for e in events)
    counters = {k: v for k, v in report.counters.items() if k != "faults"}
    overlapping = [o for o in overlaps if o > 0]
    summary = {
        "commit": _commit(),
        "backend": db.kind,
        "seed": seed,
        "minutes": minutes,
        "started_at": started_at.isoformat(timespec="seconds"),
        "seconds": {"faults": round(faults_s, 1), "total": round(time.monotonic() - began, 1)},
        "machine": _machine(),
        "config": {
            "workers": config.workers,
            "concurrency": config.concurrency,
            "clients": config.clients,
            "lease_ms": config.lease_ms,
            "heartbeat_ms": config.heartbeat_ms,
            "busy_ms": config.busy_ms if db.kind == "sqlite" else None,
            "op_timeout_s": config.op_timeout_s if db.kind == "postgres" else None,
            "fault_gap_s": list(FAULT_GAP_S),
            "pause_s": list(PAUSE_S),
            "lock_s": list(LOCK_S) if db.kind == "sqlite" else None,
            "crash_down_s": list(CRASH_DOWN_S) if db.kind == "postgres" else None,
            "mix": dict(zip(MODES, config.mix, strict=True)),
            "purge_older_than_ms": PURGE_OLDER_THAN_MS,
            "schedules": {name: {"every": "1s", "catch_up": c} for name, c in SCHEDULES},
            "limit": {"queue": LIMIT["limit_queue"], "running_per_customer": LIMIT["limit"]},
            "graph_delay_ms": GRAPH_DELAY_MS,
            "graph_cancel_p": GRAPH_CANCEL_P,
            "graph_purge_every_ms": GRAPH_PURGE_EVERY_MS,
        },
        "faults": {
            "took_effect": sum(effective.values()),
            "by_kind": {kind: effective[kind] for kind in kinds},
            "chosen_by_kind": {kind: chosen[kind] for kind in kinds},
            "sessions_terminated": sessions_terminated if db.kind == "postgres" else None,
        },
        "workers_exited_unkilled": exited,
        "tasks": counters["tasks"],
        "outcomes": counters["ended"],
        "purged": counters["purged"],
        "retried": sum(e["event"] == "retry_ok" for e in events),
        "schedule_slots": counters["schedule_slots"],
        "workflows": {
            "dependents": counters["dependents"],
            "gathers": counters["gathers"],
            "parked_decisions": counters["parked_decisions"],
            "released_past_a_purge": counters["released_past_a_purge"],
        },
        "waits": {
            "sends": sum(e["event"] == "send" for e in events),
            "sends_with_unknown_outcome": sum(e["event"] == "send_info" for e in events),
            "slept": sum(e["event"] == "slept" for e in events),
            "waited": sum(e["event"] == "waited" for e in events),
            "parks": sum(e["event"] == "settle_ok" and e.get("op") in WAIT_OPS for e in events),
        },
        "limited_runs": sum(
            e["event"] == "handler_start" and e.get("limit_key") is not None for e in events
        ),
        "key_conflicts": key_conflicts,
        "submits_failed_typed": {
            "count": sum(typed_errors.values()),
            "found_stored": counters["indeterminate_found_stored"],
            "by_error": dict(sorted(typed_errors.items(), key=lambda item: str(item[0]))),
        },
        "refused_settlements": counters["refused_settlements"],
        "leases_recovered": counters["recoveries"],
        "duplicates": {
            "count": len(windows),
            "window_s_median": round(sorted(windows)[len(windows) // 2], 2) if windows else 0,
            "window_s_max": round(max(windows), 2) if windows else 0,
        },
        "overlapping_runs": {
            "count": len(overlapping),
            "overlap_s_max": round(max(overlapping), 3) if overlapping else 0,
        },
        "quiescence": {
            "quiescent": run.quiesced,
            "all_terminal": not stuck,
            "stuck": stuck[:STUCK_ROWS_KEPT],
            "stuck_count": len(stuck),
        },
        "checker": {
            "valid": report.valid and not waits,
            "counters": counters,
            "violation_count": len(report.violations) + len(waits),
            "violations": [
                {"invariant": v.invariant, "task": v.task, "message": v.message}
                for v in [*report.violations, *waits][:VIOLATIONS_KEPT]
            ],
        },
    }
    summary["shortfalls"] = shortfalls(summary)
    return summary


def shortfalls(summary: dict[str, Any]) -> list[str]:
    """What a soak that checked anything must have done, and did not.

    A soak whose workers died on their own, whose faults never took effect or
    whose work never reached a feature of the mix checks nothing there, however
    valid its history.
    """
    missing = [
        f"worker {name} exited by itself (code {code})"
        for name, code in summary["workers_exited_unkilled"].items()
    ]
    missing += [
        f"no {kind} fault took effect"
        for kind, count in summary["faults"]["by_kind"].items()
        if count == 0 and summary["faults"]["chosen_by_kind"].get(kind, 0) > 0
    ]
    reached = {
        "schedule slots": summary["schedule_slots"],
        "gathers": summary["workflows"]["gathers"],
        "dependents": summary["workflows"]["dependents"],
        "limited runs": summary["limited_runs"],
        "durable sleeps": summary["waits"]["slept"],
        "event waits": summary["waits"]["waited"],
        "retries": summary["retried"],
        "purges": summary["purged"],
    }
    missing += [f"no {what}" for what, count in reached.items() if not count]
    return missing


def _check_waits(db: Database, events: list[dict[str, Any]], quiescent: bool) -> list[Violation]:
    """The waits' invariants (EV-1, EV-2, EV-3, SL-1) on the clients' sends, the runs past
    each wait and the final rows of the waits' tables and of the tasks."""
    history = WaitsHistory(
        events=events,
        waits=dbtools._rows(db, "select * from cairnq_waits"),
        mailbox=dbtools._rows(db, "select * from cairnq_waits_mailbox"),
        tasks=[{"id": r["id"], "status": r["status"]} for r in dbtools.snapshot(db)],
        now_ms=int(time.time() * 1000),
        quiescent=quiescent,
    )
    return check_waits(history)


# --- where it ran ----------------------------------------------------------------------------


def _git(*args: str) -> str | None:
    try:
        done = subprocess.run(
            ["git", *args], cwd=ROOT, capture_output=True, text=True, check=True, timeout=30
        )
    except (OSError, subprocess.SubprocessError):
        return None
    return done.stdout


def _commit() -> dict[str, Any]:
    """HEAD, and the changed paths it does not hold (the summaries themselves aside)."""
    status = _git("status", "--porcelain", "--", ".", ":(exclude)docs/soak")
    changed = [line[3:] for line in (status or "").splitlines()]
    sha = _git("rev-parse", "HEAD")
    return {"sha": sha and sha.strip(), "dirty": bool(changed), "changed": changed}


def _first(path: str, prefix: str, separator: str = ":") -> str | None:
    """The value of the first line of ``path`` starting with ``prefix``."""
    with contextlib.suppress(OSError):
        for line in Path(path).read_text().splitlines():
            if line.startswith(prefix) and separator in line:
                return line.split(separator, 1)[1].strip().strip('"')
    return None


def _postgres_version() -> str | None:
    """The version of the PostgreSQL binaries the private cluster runs."""
    try:
        done = subprocess.run(
            [_bin("postgres"), "--version"], capture_output=True, text=True, check=True
        )
    except (OSError, subprocess.SubprocessError):
        return None
    return done.stdout.replace("postgres (PostgreSQL)", "").strip()


def _machine() -> dict[str, Any]:
    memory_kb = _first("/proc/meminfo", "MemTotal")
    return {
        "cpu": _first("/proc/cpuinfo", "model name") or platform.processor() or None,
        "cpus": os.cpu_count(),
        "memory_gib": round(int(memory_kb.split()[0]) / 2**20, 1) if memory_kb else None,
        "os": f"{_first('/etc/os-release', 'PRETTY_NAME', '=') or platform.system()}, "
        f"kernel {platform.release()}",
        "python": f"{platform.python_implementation()} {platform.python_version()}",
        "sqlite": sqlite3.sqlite_version,
        "postgresql": _postgres_version(),
    }


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--minutes", type=float, default=10.0)
    parser.add_argument("--backend", choices=["sqlite", "postgres"], default="sqlite")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument(
        "--out", type=Path, help="where the summary goes (default docs/soak/<backend>.json)"
    )
    args = parser.parse_args()
    out: Path = args.out or ROOT / "docs" / "soak" / f"{args.backend}.json"
    folder = Path(tempfile.mkdtemp(prefix="cairnq-soak-"))
    if args.backend == "sqlite":
        summary = soak(Database.sqlite(folder / "soak.db"), folder, args.minutes, args.seed, None)
    else:
        with Cluster() as cluster:
            db = Database.postgres(cluster.dsn, "soak")
            summary = soak(db, folder, args.minutes, args.seed, cluster)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(summary, indent=2) + "\n")
    checker = summary["checker"]
    print(
        f"soak {args.backend}: valid={checker['valid']} "
        f"violations={checker['violation_count']} tasks={summary['tasks']} "
        f"faults={summary['faults']['by_kind']} outcomes={summary['outcomes']} "
        f"summary={out} histories={folder}"
    )
    for shortfall in summary["shortfalls"]:
        print(f"soak {args.backend}: checked less than it should: {shortfall}")
    return 0 if checker["valid"] and not summary["shortfalls"] else 1


if __name__ == "__main__":
    sys.exit(main())
