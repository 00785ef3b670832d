"""Generate cairnq's blocking code from its async source, with unasync.

Each async module has a generated blocking twin, checked in; ``PAIRS`` lists them,
source -> target, so a twin may live in another folder than its source (the
client's beside its source in ``cairnq/client/``, the PostgreSQL backend's in
``cairnq/backends/``). After changing a source, run::

    python scripts/generate_sync.py           # rewrite every target
    python scripts/generate_sync.py --check   # exit 1, with a diff, when one is stale

``tests/test_generated.py`` runs the check, so a stale or hand-edited generated
file fails the tests.

unasync drops ``async``/``await`` and renames tokens (names, and strings that are
exactly a name) by the table below. Then the prose of docstrings is adjusted
(``await x`` -> ``x``, ``CairnQ`` -> ``SyncCairnQ``), the module docstring is
replaced, and ruff formats the result and sorts its imports.
"""

from __future__ import annotations

import argparse
import difflib
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import NamedTuple

import unasync

ROOT = Path(__file__).resolve().parent.parent


class Twin(NamedTuple):
    """A generated module: where it is written, and the docstring that replaces its source's."""

    target: str
    docstring: str


# Async source -> its generated twin, both relative to the repository's root.
PAIRS = {
    "src/cairnq/client/_async.py": Twin(
        "src/cairnq/client/_sync.py",
        "The client's operations, blocking: ``SyncCairnQ`` is built on them.",
    ),
    "src/cairnq/backends/_pg_async.py": Twin(
        "src/cairnq/backends/_pg_sync.py",
        "The PostgreSQL backend's blocking paths: ``PostgresBackend`` mixes them in.",
    ),
    "src/cairnq/kernel/_sweeper_async.py": Twin(
        "src/cairnq/kernel/_sweeper_sync.py",
        "The retention sweeper, blocking: ``SyncRetentionSweeper`` sweeps from a daemon thread.",
    ),
    "src/cairnq/extensions/_client_async.py": Twin(
        "src/cairnq/extensions/_client_sync.py",
        "What an extension's client code needs from the blocking client: ``ClientView``.",
    ),
    "src/cairnq/extensions/_builtins_client_async.py": Twin(
        "src/cairnq/extensions/_builtins_client_sync.py",
        "The built-in extensions' client parts, blocking: ``SyncCairnQ`` inherits them.",
    ),
    **{
        f"src/cairnq/extensions/{name}/_client_async.py": Twin(
            f"src/cairnq/extensions/{name}/_client_sync.py",
            f"The client's {title}, blocking: ``SyncCairnQ`` inherits its mixin.",
        )
        for name, title in (
            ("history", "attempt history"),
            ("limits", "limits"),
            ("pauses", "pauses"),
            ("presence", "view of worker presence"),
            ("schedules", "schedules"),
            ("snooze", "snoozes"),
            ("steps", "durable steps"),
            ("workflows", "workflows"),
        )
    },
}

# unasync's own table already maps __aenter__, __aexit__, __aiter__, __anext__,
# asynccontextmanager, AsyncIterator and friends, and AsyncX -> SyncX.
REPLACEMENTS = {
    # The client.
    "CairnQ": "SyncCairnQ",
    "afollow": "follow",
    "wait_async": "wait",
    "until_live_async": "until_live",
    "arun_on": "run_on",
    # The extensions' client parts, and the modules they import.
    "_client_async": "_client_sync",
    "_builtins_client_async": "_builtins_client_sync",
    # An outside extension's namespace class for each half (``Extension.namespace``).
    "namespace": "sync_namespace",
    # The backend, and the names of each half's own state and hooks.
    "aopen": "open",
    "aclose": "close",
    "arun": "run",
    "_arun_now": "_run_now",
    "_adrive_on": "_drive_on",
    "_adrive_pipelined": "_drive_pipelined",
    "adrive": "drive",
    "arun_setup": "run_setup",
    "_abounded": "_bounded",
    "apausepoint_when_quiet": "pausepoint_when_quiet",
    "_async_connection": "_sync_connection",
    "_execute_async": "_execute_sync",
    "_configure_async": "_configure_sync",
    "_create_schema_async": "_create_schema_sync",
    "_async_source": "_sync_source",
    "_async_setup_guard": "_sync_setup_guard",
    "_async_conn_guard": "_sync_conn_guard",
    "_acheck_loop": "_check_loop",
    "_astart_listening": "_start_listening",
    "_aguard_pool": "_guard_pool",
    "ASYNC_POOL_NAME": "SYNC_POOL_NAME",
    "ASYNC_WRAPS_OTHER": "SYNC_WRAPS_OTHER",
    "ASYNC_NO_CONNECTION": "SYNC_NO_CONNECTION",
    "AsyncConnection": "Connection",
    "AsyncConnectionPool": "ConnectionPool",
    "RetentionSweeper": "SyncRetentionSweeper",
}

# Prose in docstrings and comments, which unasync leaves alone.
PROSE = (
    (re.compile(r"\bawait "), ""),
    (re.compile(r"\basync (with|for) "), r"\1 "),
    (re.compile(r"(?<![\w.])CairnQ\b"), "SyncCairnQ"),
    (re.compile(r"(?<![\w.])RetentionSweeper\b"), "SyncRetentionSweeper"),
    # The blocking half belongs to no event loop.
    (re.compile(r"\n *EventLoopMismatch: .*"), ""),
    # A section left empty by that.
    (re.compile(r"\n\n *Raises:\n(?= *\"\"\")"), "\n"),
)

# ruff's line length (pyproject.toml).
LINE_LENGTH = 100

MODULE_DOCSTRING = re.compile(r'\A"""(?:.|\n)*?"""\n')


def header(source: str) -> str:
    """The first line of every generated file."""
    line = f"# generated from {source} by scripts/generate_sync.py; do not edit\n"
    # The header names its source in full, which a deep folder takes past the line length.
    return line + ("# ruff: noqa: E501\n" if len(line) > LINE_LENGTH + 1 else "")


def _ruff(args: list[str], text: str, target: str) -> str:
    done = subprocess.run(
        [sys.executable, "-m", "ruff", *args, "--stdin-filename", str(ROOT / target), "-"],
        input=text,
        capture_output=True,
        text=True,
        cwd=ROOT,
        check=False,
    )
    if done.returncode != 0:
        raise RuntimeError(f"ruff {' '.join(args)} failed on the generated {target}: {done.stderr}")
    return done.stdout


def render(source: str, root: Path = ROOT) -> str:
    """The generated text of ``source``'s twin, from ``<root>/<source>``.

    unasync's rule works on a path fragment, so the source is rendered from a
    scratch ``_async/`` copy into a scratch ``_sync/``, wherever the pair lives.
    """
    twin = PAIRS[source]
    with tempfile.TemporaryDirectory() as scratch:
        async_dir = Path(scratch) / "_async"
        async_dir.mkdir()
        shutil.copy(root / source, async_dir / "module.py")
        rule = unasync.Rule("/_async/", "/_sync/", additional_replacements=REPLACEMENTS)
        unasync.unasync_files([str(async_dir / "module.py")], [rule])
        text = (Path(scratch) / "_sync" / "module.py").read_text()
    for pattern, replacement in PROSE:
        text = pattern.sub(replacement, text)
    text = MODULE_DOCSTRING.sub(f'"""{twin.docstring}"""\n', text, count=1)
    text = _ruff(["check", "--fix", "--select", "I,F401", "--quiet"], text, twin.target)
    text = _ruff(["format", "--quiet"], text, twin.target)
    return header(source) + text


def stale(root: Path = ROOT) -> list[str]:
    """Every generated file under ``root`` that differs from a fresh generation.

    Each entry names the file and shows a short diff (checked in -> generated).
    """
    problems = []
    for source, twin in PAIRS.items():
        fresh = render(source, root)
        path = root / twin.target
        current = path.read_text() if path.exists() else ""
        if current != fresh:
            diff = difflib.unified_diff(
                current.splitlines(),
                fresh.splitlines(),
                f"{path} (checked in)",
                f"{path} (generated)",
                lineterm="",
                n=1,
            )
            lines = list(diff)
            shown = "\n".join(lines[:30]) + ("\n..." if len(lines) > 30 else "")
            problems.append(f"{path} is out of date; regenerate it:\n{shown}")
    return problems


def main() -> int:
    """Write the generated files, or with ``--check`` only report stale ones."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--check", action="store_true", help="report, do not write")
    args = parser.parse_args()
    if args.check:
        problems = stale()
        for problem in problems:
            print(problem, file=sys.stderr)
        return 1 if problems else 0
    for source, twin in PAIRS.items():
        path = ROOT / twin.target
        path.parent.mkdir(exist_ok=True)
        path.write_text(render(source))
        print(f"wrote {twin.target}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
