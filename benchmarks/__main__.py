"""``python -m benchmarks``: cairnq's workloads on both backends, peers alongside, one table.

Examples::

    python -m benchmarks                       # cairnq on SQLite and PostgreSQL
    python -m benchmarks --peers               # ... and PgQueuer + huey (own venv)
    python -m benchmarks --quick               # small sizes, to check it runs
    python -m benchmarks --baseline ../old     # an older checkout, run for run alongside
    python -m benchmarks --peers --baseline ../afa --baseline ../f7b   # two of them
    python -m benchmarks --only drains,latency # a subset of the workloads, by name

After the figures, a "Goals" table: each goal of the current speed work as a
ratio of two cells of the same run, its bar, and whether it is met.

Every figure comes from work verified in the database afterwards; a workload
that did not finish its tasks aborts the run instead of printing a number.
Median of ``--runs`` runs (3 by default), each on a fresh database.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from . import cairnq_bench as bench
from . import workloads

ROOT = Path(__file__).resolve().parents[1]

ROWS = [
    ("submit_single_per_s", "submit, one at a time (tasks/s)"),
    ("submit_single_sync_per_s", "submit, one at a time, blocking client (tasks/s)"),
    ("submit_synchronous", "SQLite synchronous while submitting (2 = FULL: fsync each commit)"),
    ("submit_concurrent_per_s", "submit, 100 concurrent (tasks/s)"),
    ("submit_bulk_per_s", "submit_many with keys/priorities/delays (tasks/s)"),
    ("submit_bulk_ids_per_s", "submit_many, ids only, with keys/priorities/delays (tasks/s)"),
    ("submit_bulk_plain_ids_per_s", "submit_many, ids only, plain tasks (no keys) (tasks/s)"),
    ("drain_1p_per_s", "drain, 1 worker process (tasks/s)"),
    ("drain_2p_per_s", "drain, 2 worker processes (tasks/s)"),
    ("drain_4p_per_s", "drain, 4 worker processes (tasks/s)"),
    ("drain_limits_none_per_s", "drain over 100 keys, no limits, 1 process (tasks/s)"),
    ("drain_limits_loose_per_s", "... with a per-key limit that never binds (tasks/s)"),
    ("drain_limits_one_per_s", "... with at most 1 running per key (tasks/s)"),
    ("latency_p50_ms", "submit -> handler start, p50 (ms)"),
    ("latency_p95_ms", "submit -> handler start, p95 (ms)"),
    ("latency_p99_ms", "submit -> handler start, p99 (ms)"),
    ("backlog_drain_ratio", "drain 1k due behind 20k delayed / empty"),
    ("idle_probe_us", "idle probe over 20k backing-off tasks (us)"),
    ("drain_1p_rss_mb", "worker RSS at concurrency 100 (MB)"),
]


def _measure(
    tree: Path, backend: str, folder: Path, sizes: dict[str, int], names: list[str]
) -> dict[str, Any]:
    """One run of ``names`` on ``tree``, in a child process importing the tree's own
    ``src/`` and ``benchmarks.cairnq_bench`` (this tree is measured the same way)."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(tree / "src"), str(tree)])}
    script = Path(__file__).resolve().parent / "workloads.py"
    command = [
        sys.executable,
        str(script),
        backend,
        str(folder),
        json.dumps(sizes),
        ",".join(names),
    ]
    done = subprocess.run(command, cwd=tree, env=env, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise SystemExit(f"the run of {tree} failed:\n{done.stdout[-2000:]}{done.stderr[-3000:]}")
    figures: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return figures


def _peer(module: str, python: Path, args: list[str]) -> dict[str, Any]:
    done = subprocess.run(
        [str(python), "-m", f"benchmarks.peers.{module}", *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=1800,
    )
    if done.returncode != 0:
        raise bench.BenchmarkError(f"{module} failed: {done.stderr[-2000:]}")
    result: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


def _median(runs: list[dict[str, Any]]) -> dict[str, Any]:
    keys = set().union(*runs)
    return {k: statistics.median([r[k] for r in runs if k in r]) for k in keys}


def _format(value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, float) and value < 10:
        return f"{value:.2f}"
    if isinstance(value, float) and value >= 1000:
        return f"{value / 1000:.1f}k"
    return f"{value:.0f}" if isinstance(value, float) else str(value)


def _commit(checkout: Path) -> str:
    done = subprocess.run(
        ["git", "-C", str(checkout), "rev-parse", "--short", "HEAD"],
        capture_output=True,
        text=True,
        check=True,
    )
    dirty = subprocess.run(
        ["git", "-C", str(checkout), "status", "--porcelain", "--untracked-files=no"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    return done.stdout.strip() + ("+changes" if dirty else "")


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawTextHelpFormatter
    )
    parser.add_argument("--backend", choices=["sqlite", "postgres", "both"], default="both")
    parser.add_argument("--peers", action="store_true", help="also measure PgQueuer and huey")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--quick", action="store_true", help="small sizes, one run")
    parser.add_argument("--json", action="store_true", help="print the figures as JSON too")
    parser.add_argument(
        "--baseline",
        type=Path,
        action="append",
        default=[],
        help="a checkout of an older commit (its src/ and its benchmarks.cairnq_bench are "
        "used); may be given more than once. Each run measures every baseline, then this "
        "tree, then the peers, so all columns see the same machine state",
    )
    parser.add_argument(
        "--only",
        help="comma-separated workloads to run (default: all): "
        + ", ".join(workloads.WORKLOADS)
        + "; or a group: "
        + ", ".join(f"{k} ({'+'.join(v)})" for k, v in workloads.GROUPS.items()),
    )
    args = parser.parse_args()
    try:
        names = workloads.expand(args.only)
    except ValueError as exc:
        parser.error(str(exc))
    sizes = {"single": 1000, "drain": 10_000, "latency": 200, "due": 1000, "backlog": 20_000}
    runs = args.runs
    if args.quick:
        sizes = {"single": 200, "drain": 1000, "latency": 30, "due": 200, "backlog": 2000}
        runs = 1
    backends = ["sqlite", "postgres"] if args.backend == "both" else [args.backend]
    trees = [tree.resolve() for tree in args.baseline]
    labels = [_commit(tree) for tree in trees]
    if len(set(labels)) < len(labels):
        labels = [f"{label} ({tree})" for label, tree in zip(labels, trees, strict=True)]
    here = _commit(ROOT)
    peers = _peers(args.peers, backends, names, sizes) if args.peers else {}
    folder = Path(tempfile.mkdtemp(prefix="cairnq-bench-"))
    columns: dict[str, dict[str, Any]] = {}
    roles: dict[str, tuple[str, str]] = {}
    started = time.monotonic()
    for backend in backends:
        turns: list[tuple[str, Callable[[], dict[str, Any]]]] = []
        for tree, label in zip(trees, labels, strict=True):
            name = f"cairnq {backend} at {label}"
            roles[name] = ("baseline " + label, backend)
            turns.append((name, _bind(tree, backend, folder, sizes, names)))
        name = f"cairnq {backend} at {here}" if trees else f"cairnq {backend}"
        roles[name] = ("this", backend)
        turns.append((name, _bind(ROOT, backend, folder, sizes, names)))
        for peer, (peer_backend, measure) in peers.items():
            if peer_backend == backend:
                roles[peer] = (peer.split()[0], backend)
                turns.append((peer, lambda measure=measure: measure(folder)))  # type: ignore[misc]
        results: dict[str, list[dict[str, Any]]] = {name: [] for name, _ in turns}
        for _ in range(runs):
            for name, measure_turn in turns:
                results[name].append(measure_turn())
        for name, _ in turns:
            columns[name] = _median(results[name])
    elapsed = time.monotonic() - started
    print(_table(columns, sizes, runs))
    print()
    print(_goals(columns, roles, labels, backends))
    print(f"\n{len(names)} workloads, {len(trees)} baselines, {runs} runs: {elapsed / 60:.1f} min")
    if args.json:
        print(json.dumps(columns, indent=2))
    return 0


def _bind(
    tree: Path, backend: str, folder: Path, sizes: dict[str, int], names: list[str]
) -> Callable[[], dict[str, Any]]:
    return lambda: _measure(tree, backend, folder, sizes, names)


def _peers(
    wanted: bool, backends: list[str], names: list[str], sizes: dict[str, int]
) -> dict[str, tuple[str, Callable[[Path], dict[str, Any]]]]:
    """The peers measuring any of ``names``: column -> (backend, measure(folder))."""
    from .peers.setup import ensure_venv

    chosen = sorted({peer for name in names if (peer := workloads.WORKLOADS[name][2])})
    if not wanted or not chosen:
        return {}
    python = ensure_venv(ROOT)
    found: dict[str, tuple[str, Callable[[Path], dict[str, Any]]]] = {}
    if "postgres" in backends:
        only = ",".join(chosen)
        found["PgQueuer postgres"] = (
            "postgres",
            lambda folder: _peer(
                "pgqueuer_bench",
                python,
                [
                    "--dsn",
                    bench.fresh_url("postgres", folder, "pgqueuer"),
                    "--tasks",
                    str(sizes["drain"]),
                    "--latency",
                    str(sizes["latency"]),
                    "--only",
                    only,
                ],
            ),
        )
    huey = [peer for peer in chosen if peer in ("submit_single", "drain", "latency")]
    if "sqlite" in backends and huey:
        found["huey sqlite"] = (
            "sqlite",
            lambda folder: _peer(
                "huey_bench",
                python,
                [
                    "--path",
                    str(folder / "huey.db"),
                    "--tasks",
                    str(sizes["drain"]),
                    "--single",
                    str(sizes["single"]),
                    "--latency",
                    str(sizes["latency"]),
                    "--only",
                    ",".join(huey),
                ],
            ),
        )
    return found


DRAIN_KEYS = [
    "drain_1p_per_s",
    "drain_2p_per_s",
    "drain_4p_per_s",
    "drain_limits_none_per_s",
    "drain_limits_loose_per_s",
    "drain_limits_one_per_s",
]
Cell = tuple[str, str, str]  # (role, backend, figure): role "this", "PgQueuer", "huey"
# (the goal, numerator, denominator, the bar, whether the ratio must reach it or stay below)
GOALS: list[tuple[str, Cell, Cell, float, bool]] = [
    (
        "drain, 1 process: PostgreSQL vs PgQueuer",
        ("this", "postgres", "drain_1p_per_s"),
        ("PgQueuer", "postgres", "drain_1p_per_s"),
        2.0,
        True,
    ),
    (
        "drain, 1 process: SQLite vs huey",
        ("this", "sqlite", "drain_1p_per_s"),
        ("huey", "sqlite", "drain_1p_per_s"),
        6.0,
        True,
    ),
    (
        "a limit that never binds vs no limits, SQLite",
        ("this", "sqlite", "drain_limits_loose_per_s"),
        ("this", "sqlite", "drain_limits_none_per_s"),
        0.9,
        True,
    ),
    (
        "a limit that never binds vs no limits, PostgreSQL",
        ("this", "postgres", "drain_limits_loose_per_s"),
        ("this", "postgres", "drain_limits_none_per_s"),
        0.9,
        True,
    ),
    (
        "submit one at a time, SQLite blocking client vs huey",
        ("this", "sqlite", "submit_single_sync_per_s"),
        ("huey", "sqlite", "submit_single_per_s"),
        1.0,
        True,
    ),
    (
        "submit one at a time, PostgreSQL (awaited) vs PgQueuer",
        ("this", "postgres", "submit_single_per_s"),
        ("PgQueuer", "postgres", "submit_single_per_s"),
        1.0,
        True,
    ),
    (
        "submit_many_ids plain vs PgQueuer's batch enqueue",
        ("this", "postgres", "submit_bulk_plain_ids_per_s"),
        ("PgQueuer", "postgres", "submit_bulk_plain_ids_per_s"),
        1.0,
        True,
    ),
    (
        "submit_many_ids with keys vs PgQueuer's (dedupe_key)",
        ("this", "postgres", "submit_bulk_ids_per_s"),
        ("PgQueuer", "postgres", "submit_bulk_ids_per_s"),
        1.0,
        True,
    ),
    (
        "submit -> handler start p99, PostgreSQL vs PgQueuer",
        ("this", "postgres", "latency_p99_ms"),
        ("PgQueuer", "postgres", "latency_p99_ms"),
        1.0,
        False,
    ),
]


def _goals(
    columns: dict[str, dict[str, Any]],
    roles: dict[str, tuple[str, str]],
    baselines: list[str],
    backends: list[str],
) -> str:
    """The goals as ratios of this run's cells: measured, bar, met (or not measured)."""
    by_role = {role: columns[name] for name, role in roles.items()}

    def cell(role: str, backend: str, key: str) -> float | None:
        value = by_role.get((role, backend), {}).get(key)
        return None if value is None else float(value)

    rows = []
    for text, top, bottom, bar, reach in GOALS:
        num, den = cell(*top), cell(*bottom)
        ratio = None if num is None or not den else num / den
        rows.append((text, ratio, ("≥ " if reach else "< ") + f"{bar:g}", reach, bar, ""))
    for label in baselines:
        for backend in backends:
            ratios = [
                (now / then, key)
                for key in DRAIN_KEYS
                if (now := cell("this", backend, key)) is not None
                and (then := cell("baseline " + label, backend, key))
            ]
            lowest = min(ratios) if ratios else None
            rows.append(
                (
                    f"every drain row vs {label}, {backend} (the lowest)",
                    None if lowest is None else lowest[0],
                    "≥ 1",
                    True,
                    1.0,
                    "" if lowest is None else lowest[1].removesuffix("_per_s"),
                )
            )
    lines = ["Goals", "", "| goal | ratio | bar | met |", "|---|---|---|---|"]
    for text, ratio, shown, reach, bar, which in rows:
        if ratio is None:
            lines.append(f"| {text} | - | {shown} | not measured |")
            continue
        met = ratio >= bar if reach else ratio < bar
        detail = f" ({which})" if which else ""
        lines.append(f"| {text} | {ratio:.2f}{detail} | {shown} | {'yes' if met else 'no'} |")
    return "\n".join(lines)


def _table(columns: dict[str, dict[str, Any]], sizes: dict[str, int], runs: int) -> str:
    names = list(columns)
    head = "| workload | " + " | ".join(names) + " |"
    rule = "|---|" + "---|" * len(names)
    body = [
        f"| {label} | " + " | ".join(_format(columns[n].get(key)) for n in names) + " |"
        for key, label in ROWS
        if any(key in columns[n] for n in names)
    ]
    machine = (
        f"{platform.node()}: {os.cpu_count()} cpus, Python {platform.python_version()}, "
        f"{platform.system()} {platform.release()}; tasks={sizes['drain']}, median of {runs}"
    )
    return "\n".join([machine, "", head, rule, *body])


if __name__ == "__main__":
    sys.exit(main())
