"""``python -m benchmarks.drains``: the drain rows only, this tree against an older checkout.

The drain is the standing bar every change is measured against: this command
runs only the drain workloads of ``python -m benchmarks`` (10,000 no-op tasks;
1 and 2 worker processes; one process over 100 keys with no limit, a limit that
never binds, and at most 1 running per key), on both backends, alternating the
two trees run for run so both see the same machine state. Each tree is measured
by its own ``benchmarks.cairnq_bench`` in a child process importing its own
``src/``, so an older checkout needs nothing of this module.

Each cell is the median of ``--runs`` runs with the lowest and highest beside it:
the spread is the noise band a difference has to clear.

Examples::

    git worktree add ../cairnq-old HEAD~1
    python -m benchmarks.drains --baseline ../cairnq-old --runs 5
    python -m benchmarks.drains --backend sqlite --runs 3     # this tree only
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
from pathlib import Path

from .__main__ import _commit

ROOT = Path(__file__).resolve().parents[1]

ROWS = [
    ("drain_1p_per_s", "drain, 1 worker process (tasks/s)"),
    ("drain_2p_per_s", "drain, 2 worker processes (tasks/s)"),
    ("drain_limits_none_per_s", "drain over 100 keys, no limits (tasks/s)"),
    ("drain_limits_loose_per_s", "... a per-key limit that never binds (tasks/s)"),
    ("drain_limits_one_per_s", "... at most 1 running per key (tasks/s)"),
]

# Run in the measured tree's own directory with its own src/ first on the path.
_CHILD = """
import json, sys
from pathlib import Path
from benchmarks import cairnq_bench as bench
backend, folder, count = sys.argv[1], Path(sys.argv[2]), int(sys.argv[3])
figures = {}
for processes in (1, 2):
    figures.update(bench.drain(bench.fresh_url(backend, folder, f"d{processes}"), count, processes))
for limits in ("none", "loose", "one"):
    url = bench.fresh_url(backend, folder, f"l{limits}")
    figures.update(bench.drain_limited(url, count, limits))
print(json.dumps({k: v for k, v in figures.items() if k.endswith("_per_s")}))
"""


def _measure(tree: Path, backend: str, folder: Path, count: int) -> dict[str, float]:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(tree / "src"), str(tree)])}
    done = subprocess.run(
        [sys.executable, "-c", _CHILD, backend, str(folder), str(count)],
        cwd=tree,
        env=env,
        capture_output=True,
        text=True,
        check=False,
        timeout=1800,
    )
    if done.returncode != 0:
        raise SystemExit(f"the drains of {tree} failed:\n{done.stderr[-3000:]}")
    figures: dict[str, float] = json.loads(done.stdout.strip().splitlines()[-1])
    return figures


def _cell(values: list[float]) -> str:
    def k(value: float) -> str:
        return f"{value / 1000:.2f}k"

    median = statistics.median(values)
    if len(values) == 1:
        return k(median)
    return f"{k(median)} ({k(min(values))}-{k(max(values))})"


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawTextHelpFormatter
    )
    parser.add_argument("--backend", choices=["sqlite", "postgres", "both"], default="both")
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--tasks", type=int, default=10_000)
    parser.add_argument("--baseline", type=Path, help="a checkout of an older commit")
    args = parser.parse_args()
    backends = ["sqlite", "postgres"] if args.backend == "both" else [args.backend]
    trees = [ROOT] if args.baseline is None else [args.baseline.resolve(), ROOT]
    folder = Path(tempfile.mkdtemp(prefix="cairnq-drains-"))
    results: dict[str, list[dict[str, float]]] = {}
    names: list[str] = []
    for backend in backends:
        columns = [f"{backend} at {_commit(tree)}" for tree in trees]
        if len(set(columns)) < len(columns):
            columns = [f"{column} ({tree})" for column, tree in zip(columns, trees, strict=True)]
        names.extend(columns)
        for column in columns:
            results[column] = []
        for _ in range(args.runs):
            for tree, column in zip(trees, columns, strict=True):
                results[column].append(_measure(tree, backend, folder, args.tasks))
    print(
        f"{platform.node()}: {os.cpu_count()} cpus, Python {platform.python_version()}, "
        f"{platform.system()} {platform.release()}; tasks={args.tasks}, "
        f"median (lowest-highest) of {args.runs} runs, trees alternating run for run\n"
    )
    print("| workload | " + " | ".join(names) + " |")
    print("|---|" + "---|" * len(names))
    for key, label in ROWS:
        cells = [_cell([run[key] for run in results[n] if key in run]) for n in names]
        print(f"| {label} | " + " | ".join(cells) + " |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
