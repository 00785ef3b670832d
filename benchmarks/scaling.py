"""``python -m benchmarks.scaling``: throughput and CPU per task by process count.

Examples::

    python -m benchmarks.scaling                          # both backends, 1,2,4,8 processes
    python -m benchmarks.scaling --backend postgres --processes 1,2 --runs 1
    python -m benchmarks.scaling --quick                  # small sizes, one run: does it work?

For each process count P it measures three workloads, each on a fresh database
(or SQLite file) and checked there afterwards:

- drain: ``--tasks`` queued no-op tasks, P worker processes (concurrency 100,
  ``run(until_idle=True)``);
- submit: ``--singles`` tasks, P processes each submitting its share one
  ``submit`` at a time;
- submit_many: ``--tasks`` tasks, P processes each submitting its share with
  ``submit_many`` in batches of up to 1,000 plain tasks.

The processes start, connect and report ready before the clock starts (their
interpreter start-up is left out, unlike ``python -m benchmarks``'s drain rows);
the time runs until the last one has finished its work. Figures per task:

- cairnq CPU: user + system time of the worker or submitting processes during
  the work, read by each process itself (``getrusage``). On SQLite the database
  runs inside these processes, so this figure holds SQLite's work too;
- PostgreSQL server CPU (``benchmarks/servercpu.py``): the backends serving the
  benchmark's database, and the server's shared processes (WAL writer,
  checkpointer, ...); and, for reference, the whole server, other clients' work
  on it included.

From the CPU per task it prints the throughput that C cores could carry if CPU
were the only limit: C / (CPU per task). That is a ceiling computed from CPU, not
a measurement: locks (one writer at a time per SQLite file), disk flushes and the
network are left out.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from .cairnq_bench import ROOT, BenchmarkError, _count, fresh_url
from .servercpu import ServerCpu

WORKLOADS = {
    "drain": "drain (worker processes)",
    "submit": "submit, one at a time (submitting processes)",
    "submit_many": "submit_many, batches of 1,000 (submitting processes)",
}


def run_children(url: str, commands: list[list[str]]) -> dict[str, float]:
    """Start ``commands`` (``python -m`` module and arguments), each of which prints
    ``ready``, waits for a line on stdin, works, prints one JSON line with
    ``cpu_s`` and ``ended`` and waits for another line before it disconnects;
    time them from the go line until the last one ended.

    Returns ``elapsed_s`` and ``cpu_s`` (the processes' total), and on PostgreSQL
    the server's ``database_s``, ``shared_s`` and ``server_s``.
    """
    env = {**os.environ, "CAIRNQ_BENCH_HANDSHAKE": "1"}
    procs = [
        subprocess.Popen(
            [sys.executable, "-m", *command],
            cwd=ROOT,
            env=env,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        for command in commands
    ]
    try:
        for proc in procs:
            assert proc.stdout is not None
            line = proc.stdout.readline().strip()
            if line != "ready":
                raise BenchmarkError(f"a benchmark process did not start (said {line!r})")
        server = ServerCpu(url.rsplit("/", 1)[1]) if url.startswith("postgres") else None
        if server is not None:
            server.start()
        go = time.time()
        for proc in procs:
            assert proc.stdin is not None
            proc.stdin.write("go\n")
            proc.stdin.flush()
        # Each prints its figures, then stays connected until told: the server's
        # backends are still there to be read when the sampler stops.
        outputs = [_report_line(proc) for proc in procs]
        figures = server.stop() if server is not None else {}
        for proc in procs:
            assert proc.stdin is not None
            with contextlib.suppress(BrokenPipeError):
                proc.stdin.write("bye\n")
                proc.stdin.flush()
        for proc in procs:
            proc.communicate(timeout=60)
    finally:
        for proc in procs:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
    if any(proc.returncode != 0 for proc in procs) or not all(outputs):
        raise BenchmarkError(f"a benchmark process failed ({[p.returncode for p in procs]})")
    reports = [json.loads(out) for out in outputs]
    figures["elapsed_s"] = max(r["ended"] for r in reports) - go
    figures["cpu_s"] = sum(r["cpu_s"] for r in reports)
    return figures


def _report_line(proc: subprocess.Popen[str]) -> str:
    """The process's JSON line; an empty string if it exited without one."""
    assert proc.stdout is not None
    for line in proc.stdout:
        if line.startswith("{"):
            return line
    return ""


def _shares(count: int, processes: int) -> list[int]:
    return [count // processes + (1 if i < count % processes else 0) for i in range(processes)]


def drain(url: str, count: int, processes: int, mode: str = "none") -> dict[str, float]:
    """``count`` queued no-op tasks drained by ``processes`` workers; all must succeed."""
    from cairnq import SyncCairnQ

    with SyncCairnQ.connect(url) as cq:
        for start in range(0, count, 1000):
            cq.submit_many([("noop", {}) for _ in range(min(1000, count - start))])
    figures = run_children(
        url, [["benchmarks.worker_main", url, "100", mode] for _ in range(processes)]
    )
    done = _count(url, "succeeded")
    if done != count:
        raise BenchmarkError(f"the drain finished {done} of {count} tasks")
    return figures


def submit(url: str, count: int, processes: int, mode: str) -> dict[str, float]:
    """``count`` tasks submitted by ``processes`` processes (``single`` or ``many``)."""
    from cairnq import SyncCairnQ

    with SyncCairnQ.connect(url):
        pass  # the schema, before the clock starts
    figures = run_children(
        url,
        [["benchmarks.submitter_main", url, str(n), mode] for n in _shares(count, processes)],
    )
    stored = _count(url, "queued")
    if stored != count:
        raise BenchmarkError(f"{stored} of {count} submitted tasks are stored")
    return figures


def per_task(figures: dict[str, float], count: int) -> dict[str, float]:
    """Tasks/s and CPU microseconds per task from ``run_children``'s seconds."""
    out = {"per_s": count / figures["elapsed_s"], "cairnq_us": figures["cpu_s"] / count * 1e6}
    for key in ("database_s", "shared_s", "server_s"):
        if key in figures:
            out[key.replace("_s", "_us")] = figures[key] / count * 1e6
    return out


def measure(
    backend: str, folder: Path, processes: list[int], sizes: dict[str, int], runs: int
) -> dict[tuple[str, int], dict[str, float]]:
    """Median figures per (workload, process count); the runs take turns per row."""
    samples: dict[tuple[str, int], list[dict[str, float]]] = {}
    for _ in range(runs):
        for count in processes:
            for workload in WORKLOADS:
                url = fresh_url(backend, folder, f"scale-{count}")
                if workload == "drain":
                    size, figures = sizes["tasks"], drain(url, sizes["tasks"], count)
                elif workload == "submit":
                    size, figures = sizes["singles"], submit(url, sizes["singles"], count, "single")
                else:
                    size, figures = sizes["tasks"], submit(url, sizes["tasks"], count, "many")
                samples.setdefault((workload, count), []).append(per_task(figures, size))
    return {
        row: {k: statistics.median(s[k] for s in runs_) for k in runs_[0]}
        for row, runs_ in samples.items()
    }


def _rate(value: float) -> str:
    if value >= 1e6:
        return f"{value / 1e6:.1f}M"
    return f"{value / 1000:.1f}k" if value >= 1000 else f"{value:.0f}"


def _total(row: dict[str, float]) -> float:
    """CPU µs per task: cairnq's, and the PostgreSQL server's for this database."""
    return row["cairnq_us"] + row.get("database_us", 0.0) + row.get("shared_us", 0.0)


def table(backend: str, figures: dict[tuple[str, int], dict[str, float]]) -> str:
    postgres = backend == "postgres"
    head = ["workload", "processes", "tasks/s", "cairnq CPU µs/task"]
    if postgres:
        head += ["server CPU µs/task: this database", "shared processes", "whole server"]
    else:
        head[-1] += " (SQLite's work included)"
    head.append("cores used")
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for (workload, count), row in figures.items():
        cells = [workload, str(count), _rate(row["per_s"]), f"{row['cairnq_us']:.0f}"]
        if postgres:
            cells += [f"{row[k]:.0f}" for k in ("database_us", "shared_us", "server_us")]
        cells.append(f"{row['per_s'] * _total(row) / 1e6:.2f}")
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def ceilings(
    backend: str, figures: dict[tuple[str, int], dict[str, float]], cores: list[int]
) -> list[str]:
    """Per workload, C / (CPU per task) at each core count C, from the fewest and
    from the most processes measured (contention raises the CPU per task)."""
    lines = []
    counts = "/".join(str(n) for n in cores)
    for workload in WORKLOADS:
        rows = sorted(((c, r) for (w, c), r in figures.items() if w == workload), key=_first)
        if not rows:
            continue
        ends = rows[:1] if len(rows) == 1 else [rows[0], rows[-1]]
        spent = ", ".join(f"{_total(r):.0f} µs at {c} process{'es' * (c > 1)}" for c, r in ends)
        tops = ", ".join(
            "/".join(_rate(n * 1e6 / _total(r)) for n in cores) + f" (from {c})" for c, r in ends
        )
        lines.append(
            f"- {workload}: CPU per task {spent}. At {counts} cores, the CPU-bound "
            f"ceiling is about {tops} tasks/s."
        )
        server = [(c, r.get("database_us", 0.0) + r.get("shared_us", 0.0)) for c, r in ends]
        if backend == "postgres" and all(us > 0 for _, us in server):
            part = ", ".join(f"{us:.0f} µs at {c}" for c, us in server)
            alone = ", ".join(
                "/".join(_rate(n * 1e6 / us) for n in cores) + f" (from {c})" for c, us in server
            )
            lines.append(
                f"  The server's part, {part}: a PostgreSQL server with {counts} cores of "
                f"its own tops out around {alone} tasks/s."
            )
    return lines


def _first(item: tuple[int, Any]) -> int:
    return item[0]


def main() -> int:
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks.scaling",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--backend", choices=["sqlite", "postgres", "both"], default="both")
    parser.add_argument("--processes", default="1,2,4,8", help="process counts (1,2,4,8)")
    parser.add_argument("--tasks", type=int, default=10_000, help="drain and submit_many (10,000)")
    parser.add_argument("--singles", type=int, default=2_000, help="one-at-a-time submits (2,000)")
    parser.add_argument("--runs", type=int, default=3, help="median of this many (3)")
    parser.add_argument("--cores", default="8,16,64", help="core counts to predict (8,16,64)")
    parser.add_argument("--quick", action="store_true", help="1,000 tasks, 200 submits, 1 run")
    parser.add_argument("--json", action="store_true", help="print the figures as JSON too")
    args = parser.parse_args()
    processes = [int(p) for p in args.processes.split(",")]
    cores = [int(c) for c in args.cores.split(",")]
    sizes = {"tasks": args.tasks, "singles": args.singles}
    runs = args.runs
    if args.quick:
        sizes, runs = {"tasks": 1000, "singles": 200}, 1
    backends = ["sqlite", "postgres"] if args.backend == "both" else [args.backend]
    folder = Path(tempfile.mkdtemp(prefix="cairnq-scaling-"))
    print(
        f"{platform.node()}: {os.cpu_count()} cores, Python {platform.python_version()}, "
        f"{platform.system()} {platform.release()}; tasks={sizes['tasks']}, "
        f"singles={sizes['singles']}, median of {runs}; "
        f"load average {os.getloadavg()[0]:.2f} at the start",
        flush=True,
    )
    out: dict[str, Any] = {}
    for backend in backends:
        started = time.monotonic()
        figures = measure(backend, folder, processes, sizes, runs)
        print(
            f"\n{backend} ({time.monotonic() - started:.0f} s, load average "
            f"{os.getloadavg()[0]:.2f} at the end):\n"
        )
        print(table(backend, figures))
        print()
        print("\n".join(ceilings(backend, figures, cores)))
        out[backend] = {f"{w} {c}": row for (w, c), row in figures.items()}
    print(
        "\nCeilings are C / (CPU per task): computed from CPU, not measured, with "
        "locks, disk flushes and network left out. One SQLite file takes one write "
        "transaction at a time, whatever the cores."
    )
    if args.json:
        print(json.dumps(out, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
