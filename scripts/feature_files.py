"""Which Python files of the package name each built-in feature, inside its package and outside.

    python -m scripts.feature_files            # the table, one line per feature
    python -m scripts.feature_files --list     # and the files outside each feature's package

A file names a feature when one of its identifiers or strings (docstrings aside) holds one
of the feature's ``words`` (its ``Extension.words``), the rule of
``tests/test_kernel_names.py``. A feature's package is ``src/cairnq/extensions/<name>/``;
the registry of built-ins (``REGISTRY``: the list of them, and the compositions of their
client, worker and context parts that the client, the worker and the context inherit)
names every built-in by design and has a column of its own, as have the facades
(``FACADES``: the public import paths kept, such as ``cairnq.flow``, and the typed
keywords of ``Worker(**options)``). Words are fragments, so a file can be counted for a
word used in another sense: ``OTHER_SENSE`` lists each such file with the sense, in a
column of its own, and the script fails on an entry that no longer matches.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from tests.test_kernel_names import mentions

from cairnq.extensions import builtins

SRC = Path(__file__).resolve().parents[1] / "src" / "cairnq"

# The modules that list or compose the built-ins, so name each of them.
REGISTRY = (
    "extensions/_registry.py",
    "extensions/_builtins_client_async.py",
    "extensions/_builtins_client_sync.py",
    "extensions/_builtins_worker.py",
    "extensions/_builtins_context_async.py",
    "extensions/_builtins_context_sync.py",
)

# Public import paths that re-export the built-ins' names, and the worker's typed keywords.
FACADES = (
    "__init__.py",
    "context.py",
    "flow.py",
    "history.py",
    "limits.py",
    "schedules/__init__.py",
    "workflows.py",
    "worker/_compat.py",
)

# (file, feature) -> the other sense in which the file uses one of the feature's words.
OTHER_SENSE = {
    ("backpressure.py", "limits"): "a queue's depth limit (limit_for)",
    ("extensions/snooze/_context_async.py", "limits"): "the snooze limit (limit_error)",
    ("extensions/snooze/_ops.py", "limits"): "the snooze limit (limit_error)",
    ("_crashpoints.py", "pauses"): "a crash test's pause point",
    ("extensions/schedules/_client_async.py", "pauses"): "a schedule paused",
    ("extensions/schedules/_client_sync.py", "pauses"): "a schedule paused",
    ("extensions/schedules/_model.py", "pauses"): "a schedule paused",
    ("extensions/schedules/_ops.py", "pauses"): "a schedule paused",
    ("extensions/schedules/_surfaces/cli.py", "pauses"): "a schedule paused",
    ("extensions/schedules/_surfaces/pages.py", "pauses"): "a schedule paused",
    ("extensions/schedules/_client_async.py", "history"): "a schedule's slot history",
    ("extensions/schedules/_client_sync.py", "history"): "a schedule's slot history",
    ("extensions/schedules/_ops.py", "history"): "a schedule's slot history",
    ("extensions/schedules/_surfaces/cli.py", "history"): "a schedule's slot history",
    ("extensions/schedules/_surfaces/pages.py", "history"): "a schedule's slot history",
    ("extensions/steps/_ops.py", "history"): "x0009, steps' migration, creates both tables",
    ("contrib/fastapi.py", "workflows"): "FastAPI's Depends",
    ("cli/__init__.py", "schedules"): "scheduled: a queued task not due yet",
    ("dashboard/_pages.py", "schedules"): "scheduled: a queued task not due yet",
    ("top.py", "schedules"): "scheduled: a queued task not due yet",
    ("extensions/history/_panel.py", "schedules"): "scheduled: a queued task not due yet",
    ("extensions/history/_ops.py", "snooze"): "the attempt outcome 'snoozed'",
    ("worker/_task_events.py", "snooze"): "the task event kind 'snoozed'",
    ("extensions/workflows/_context_async.py", "snooze"): "the task event kind 'snoozed'",
}


def naming_files() -> dict[str, list[str]]:
    """{feature: sorted paths (relative to the package) of the files that name it}."""
    found: dict[str, list[str]] = {ext.name: [] for ext in builtins()}
    for path in sorted(SRC.rglob("*.py")):
        relative = path.relative_to(SRC).as_posix()
        for feature in mentions(path.read_text()):
            found[feature].append(relative)
    return found


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--list", action="store_true", help="name the files outside")
    args = parser.parse_args(argv)
    found = naming_files()
    stale = [key for key in OTHER_SENSE if key[0] not in found.get(key[1], ())]
    if stale:
        print(f"OTHER_SENSE entries that no longer match: {stale}", file=sys.stderr)
        return 1
    columns = ("files", "inside", "registry", "facades", "other sense", "outside")
    print(f"{'feature':<10} " + " ".join(f"{c:>{max(len(c), 5)}}" for c in columns))
    for feature, files in found.items():
        inside = [f for f in files if f.startswith(f"extensions/{feature}/")]
        registry = [f for f in files if f in REGISTRY]
        facades = [f for f in files if f in FACADES]
        other = [f for f in files if (f, feature) in OTHER_SENSE and f not in inside]
        outside = [f for f in files if f not in {*inside, *registry, *facades, *other}]
        counts = (files, inside, registry, facades, other, outside)
        print(
            f"{feature:<10} "
            + " ".join(f"{len(n):>{max(len(c), 5)}}" for c, n in zip(columns, counts, strict=True))
        )
        if args.list:
            for name in facades:
                print(f"    facade  {name}")
            for name in other:
                print(f"    other   {name}: {OTHER_SENSE[(name, feature)]}")
            for name in outside:
                print(f"    OUTSIDE {name}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
