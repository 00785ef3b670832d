"""The workloads of ``python -m benchmarks`` by name, run on any checkout's own benchmarks.

``python -m benchmarks`` measures each tree (this one, and every ``--baseline``)
in a child process that imports that tree's ``src/`` and its own
``benchmarks.cairnq_bench``; this file is loaded there by its path, so it
imports nothing of this tree. A workload the older tree's ``cairnq_bench`` does
not have (or not with that option) is skipped there: its cells print ``-``.

Run as a script (what the parent does)::

    python workloads.py BACKEND FOLDER SIZES_JSON NAME[,NAME...]

prints the figures as one JSON object.
"""

from __future__ import annotations

import asyncio
import inspect
import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

Sizes = dict[str, int]
Run = Callable[[Any, Callable[[str], str], Sizes], dict[str, Any]]


def _has(bench: Any, name: str, *options: str) -> bool:
    fn = getattr(bench, name, None)
    if fn is None:
        return False
    parameters = inspect.signature(fn).parameters
    return all(option in parameters for option in options)


def _submit_single(bench: Any, fresh: Callable[[str], str], sizes: Sizes) -> dict[str, Any]:
    return dict(asyncio.run(bench.submit_single(fresh("single"), sizes["single"])))


def _submit_single_sync(bench: Any, fresh: Callable[[str], str], sizes: Sizes) -> dict[str, Any]:
    if not _has(bench, "submit_single_sync"):
        return {}
    return dict(bench.submit_single_sync(fresh("single-sync"), sizes["single"]))


def _submit_concurrent(bench: Any, fresh: Callable[[str], str], sizes: Sizes) -> dict[str, Any]:
    return dict(asyncio.run(bench.submit_concurrent(fresh("concurrent"), sizes["single"])))


def _bulk(**options: bool) -> Run:
    def run(bench: Any, fresh: Callable[[str], str], sizes: Sizes) -> dict[str, Any]:
        if not _has(bench, "submit_bulk", *options):
            return {}
        name = "bulk" + "".join(f"-{k}" for k, v in sorted(options.items()) if v)
        return dict(asyncio.run(bench.submit_bulk(fresh(name), sizes["drain"], **options)))

    return run


def _drain(processes: int) -> Run:
    def run(bench: Any, fresh: Callable[[str], str], sizes: Sizes) -> dict[str, Any]:
        figures = bench.drain(fresh(f"drain{processes}"), sizes["drain"], processes)
        # The RSS is read from the 1-process drain only, as the table has always shown it.
        return {k: v for k, v in figures.items() if processes == 1 or k.endswith("_per_s")}

    return run


def _limited(limits: str) -> Run:
    def run(bench: Any, fresh: Callable[[str], str], sizes: Sizes) -> dict[str, Any]:
        if not _has(bench, "drain_limited"):
            return {}
        return dict(bench.drain_limited(fresh(f"limits-{limits}"), sizes["drain"], limits))

    return run


def _latency(bench: Any, fresh: Callable[[str], str], sizes: Sizes) -> dict[str, Any]:
    return dict(bench.latency(fresh("latency"), sizes["latency"]))


def _backlog(bench: Any, fresh: Callable[[str], str], sizes: Sizes) -> dict[str, Any]:
    return dict(bench.backlog(fresh("backlog"), sizes["due"], sizes["backlog"]))


def _probe(bench: Any, fresh: Callable[[str], str], sizes: Sizes) -> dict[str, Any]:
    return dict(bench.probe_cost(fresh("probe"), sizes["backlog"]))


#: name -> (what it measures, how, the peers' workload that matches it or None).
WORKLOADS: dict[str, tuple[str, Run, str | None]] = {
    "single": ("submit, one at a time (awaited)", _submit_single, "submit_single"),
    "single_sync": ("submit, one at a time, blocking client", _submit_single_sync, None),
    "concurrent": ("submit, 100 concurrent", _submit_concurrent, None),
    "bulk": ("submit_many with keys/priorities/delays", _bulk(), None),
    "bulk_ids": (
        "submit_many_ids with keys/priorities/delays",
        _bulk(ids_only=True),
        "submit_bulk",
    ),
    "bulk_plain_ids": (
        "submit_many_ids, plain tasks",
        _bulk(keyed=False, ids_only=True),
        "submit_bulk",
    ),
    "drain1": ("drain, 1 worker process", _drain(1), "drain"),
    "drain2": ("drain, 2 worker processes", _drain(2), None),
    "drain4": ("drain, 4 worker processes", _drain(4), None),
    "limits_none": ("drain over 100 keys, no limits", _limited("none"), None),
    "limits_loose": ("... a per-key limit that never binds", _limited("loose"), None),
    "limits_one": ("... at most 1 running per key", _limited("one"), None),
    "latency": ("submit -> handler start", _latency, "latency"),
    "backlog": ("drain 1k due behind 20k delayed / empty", _backlog, None),
    "probe": ("idle probe over 20k backing-off tasks", _probe, None),
}

#: Names that stand for several workloads in ``--only``.
GROUPS: dict[str, list[str]] = {
    "submits": ["single", "single_sync", "concurrent", "bulk", "bulk_ids", "bulk_plain_ids"],
    "drains": ["drain1", "drain2", "drain4", "limits_none", "limits_loose", "limits_one"],
    # What the Goals table needs, and nothing else.
    "goals": [
        "single",
        "single_sync",
        "bulk_ids",
        "bulk_plain_ids",
        "drain1",
        "drain2",
        "drain4",
        "limits_none",
        "limits_loose",
        "limits_one",
        "latency",
    ],
}


def expand(only: str | None) -> list[str]:
    """The workload names ``--only`` selects (all of them without it), in table order.

    Raises ``ValueError`` naming what is unknown.
    """
    if not only:
        return list(WORKLOADS)
    wanted: set[str] = set()
    unknown = []
    for name in (part.strip() for part in only.split(",")):
        if not name:
            continue
        if name in GROUPS:
            wanted.update(GROUPS[name])
        elif name in WORKLOADS:
            wanted.add(name)
        else:
            unknown.append(name)
    if unknown:
        known = ", ".join([*WORKLOADS, *GROUPS])
        raise ValueError(f"unknown workloads: {', '.join(unknown)} (known: {known})")
    return [name for name in WORKLOADS if name in wanted]


def measure(
    bench: Any, backend: str, folder: Path, sizes: Sizes, names: list[str]
) -> dict[str, Any]:
    """Run ``names`` with ``bench`` (a tree's ``benchmarks.cairnq_bench``), each on a fresh
    database."""
    figures: dict[str, Any] = {}

    def fresh(name: str) -> str:
        return str(bench.fresh_url(backend, folder, name))

    for name in names:
        figures.update(WORKLOADS[name][1](bench, fresh, sizes))
    return figures


def main() -> int:
    # Run by path: this file's folder is first on the path; the measured tree's
    # ``benchmarks`` package comes from PYTHONPATH instead.
    if sys.path and Path(sys.path[0]).resolve() == Path(__file__).resolve().parent:
        del sys.path[0]
    from benchmarks import cairnq_bench  # the measured tree's own

    backend, folder, sizes, names = sys.argv[1:5]
    figures = measure(cairnq_bench, backend, Path(folder), json.loads(sizes), names.split(","))
    print(json.dumps(figures))
    return 0


if __name__ == "__main__":
    sys.exit(main())
