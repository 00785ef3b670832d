"""The kernel knows no feature by name.

The kernel's modules (the kernel's operations, the protocol, the seam and the
backends, the leaves under them) hold tasks, keys, claims, settlements, heartbeats, recovery and
retention. A feature (schedules, limits, pauses, snooze, workflows, durable steps,
attempt history, worker presence) plugs into them and is never named by them: not
in an identifier, an attribute, an argument or a string (docstrings and comments
aside, which may explain what plugs in where).

A mention the kernel still has is listed in ``KNOWN`` (none today): the list may
only shrink. A count above its entry (a new mention) fails, and so does a count
below it, so the entry is lowered with the change that removed the mention.
"""

from __future__ import annotations

import ast
from collections import Counter
from pathlib import Path

import pytest

import cairnq
from cairnq.extensions import builtins

SRC = Path(cairnq.__file__).parent

# What each feature is called in code (each extension's ``words``); a kernel identifier
# or string holding one of these (case-insensitive) names the feature.
WORDS: dict[str, tuple[str, ...]] = {ext.name: tuple(ext.words) for ext in builtins()}

# The kernel: the modules below the features (every feature is in ``extensions/``).
KERNEL = (
    "kernel/__init__.py",
    "kernel/_shared.py",
    "kernel/admin.py",
    "kernel/claim.py",
    "kernel/ledger.py",
    "kernel/periodic.py",
    "kernel/procedures.py",
    "kernel/points.py",
    "kernel/reads.py",
    "kernel/retention.py",
    "kernel/_sweep.py",
    "kernel/_sweeper_async.py",
    "kernel/_sweeper_sync.py",
    "kernel/store_calls.py",
    "kernel/setup.py",
    "kernel/settle.py",
    "kernel/submit.py",
    "kernel/views.py",
    "protocol/statements.py",
    "protocol/steps.py",
    "protocol/__init__.py",
    "backends/__init__.py",
    "backends/base.py",
    "backends/_registry.py",
    "backends/sqlite.py",
    "backends/_sqlite_writer.py",
    "backends/postgres.py",
    "backends/_postgres_core.py",
    "backends/_pg_async.py",
    "backends/_pg_sync.py",
    "backends/_pg_errors.py",
    "backends/_postgres_inspect.py",
    "backends/pg_executor.py",
    "backends/_asyncpg_executor.py",
    "_wakeups.py",
    "_clock.py",
    "_checks.py",
    "_events.py",
    "_ids.py",
    "_json.py",
    "errors.py",
    "models.py",
    "durations.py",
    "backoff.py",
)

# (module, feature) -> mentions today. Only ever lowered.
KNOWN: dict[tuple[str, str], int] = {}


def mentions(source: str) -> Counter[str]:
    """How many identifiers and strings of ``source`` name each feature of ``WORDS``.

    Docstrings are left out; every other string constant counts, and so does every
    name, attribute, argument, function, class and imported name.
    """
    tree = ast.parse(source)
    docstrings = {
        id(node.body[0].value)
        for node in ast.walk(tree)
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef))
        and node.body
        and isinstance(node.body[0], ast.Expr)
        and isinstance(node.body[0].value, ast.Constant)
        and isinstance(node.body[0].value.value, str)
    }
    texts: list[str] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Name):
            texts.append(node.id)
        elif isinstance(node, ast.Attribute):
            texts.append(node.attr)
        elif isinstance(node, (ast.arg, ast.keyword)) and node.arg:
            texts.append(node.arg)
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            texts.append(node.name)
        elif isinstance(node, ast.alias):
            texts.append(node.name)
            if node.asname:
                texts.append(node.asname)
        elif isinstance(node, ast.ImportFrom) and node.module:
            texts.append(node.module)
        elif (
            isinstance(node, ast.Constant)
            and isinstance(node.value, str)
            and id(node) not in docstrings
        ):
            texts.append(node.value)
    found: Counter[str] = Counter()
    for text in texts:
        lowered = text.lower()
        for feature, words in WORDS.items():
            if any(word in lowered for word in words):
                found[feature] += 1
    return found


def kernel_mentions() -> dict[tuple[str, str], int]:
    """Every (kernel module, feature) named in that module, with its count."""
    table: dict[tuple[str, str], int] = {}
    for module in KERNEL:
        path = SRC / module
        for feature, count in mentions(path.read_text()).items():
            table[(module, feature)] = count
    return table


def test_every_kernel_module_listed_exists() -> None:
    missing = [module for module in KERNEL if not (SRC / module).exists()]
    assert missing == [], f"listed as kernel but not found (moved? update KERNEL): {missing}"


def test_the_kernel_names_no_feature_beyond_the_known_mentions_and_those_only_shrink() -> None:
    found = kernel_mentions()
    grown = {k: (v, KNOWN.get(k, 0)) for k, v in found.items() if v > KNOWN.get(k, 0)}
    shrunk = {k: (found.get(k, 0), v) for k, v in KNOWN.items() if found.get(k, 0) < v}
    table = "\n".join(f"    {k!r}: {v}," for k, v in sorted(found.items()))
    assert not grown, (
        f"the kernel names a feature more than before, (found, known): {grown}; "
        "plug the feature in through an extension point instead"
    )
    assert not shrunk, f"mentions removed, (found, known): {shrunk}; lower KNOWN to:\n{table}"


@pytest.mark.parametrize(
    ("source", "feature"),
    [
        ("def complete(ids, workflows: bool): ...", "workflows"),
        ("x = ops.after_parked(rows)", "workflows"),
        ("call('limit_keys_put', {})", "limits"),
        ("from .schedules import Scheduler", "schedules"),
        ("gate.retry(snoozed=1)", "snooze"),
        ("if queue in paused: return", "pauses"),
        ("self.presence = None", "presence"),
    ],
)
def test_the_scan_finds_a_feature_named_in_code(source: str, feature: str) -> None:
    assert mentions(source)[feature] >= 1


def test_the_scan_leaves_docstrings_out() -> None:
    source = 'def claim():\n    """Limits and workflows plug in here."""\n    return 1\n'
    assert mentions(source) == Counter()
