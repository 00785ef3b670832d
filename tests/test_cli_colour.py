"""The command line colours its error line and the worker's log levels on a terminal only.

Styles appear when the stream is a terminal, ``NO_COLOR`` is unset or empty and
``TERM`` is not ``dumb``; piped output is the plain text scripts read.
"""

from __future__ import annotations

import logging
import os
import pty
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import TextIO

import pytest

from cairnq.cli._style import LevelColours

CLI = Path(sys.executable).parent / "cairnq"
RED_ERROR = "\x1b[1;31mcairnq: error:\x1b[0m"


def in_a_terminal(args: list[str], cwd: Path, env: dict[str, str]) -> str:
    """What ``args`` writes to a pseudo-terminal given as its stdout and stderr."""
    leader, follower = pty.openpty()
    proc = subprocess.Popen(
        args, cwd=cwd, env=env, stdin=subprocess.DEVNULL, stdout=follower, stderr=follower
    )
    os.close(follower)
    chunks: list[bytes] = []
    while True:
        try:
            chunk = os.read(leader, 65536)
        except OSError:  # EIO: the terminal's last writer has gone
            break
        if not chunk:
            break
        chunks.append(chunk)
    os.close(leader)
    proc.wait(timeout=60)
    return b"".join(chunks).decode()


def plain_env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("NO_COLOR", "CAIRNQ_DATABASE_URL")}
    env["TERM"] = "xterm"
    return {**env, **extra}


@pytest.mark.slow
def test_an_error_line_starts_in_bold_red_on_a_terminal(tmp_path: Path) -> None:
    shown = in_a_terminal([str(CLI), "--db", "missing.db", "ls"], tmp_path, plain_env())
    assert shown.startswith(RED_ERROR + " no cairnq database at "), shown


@pytest.mark.slow
def test_an_error_line_has_no_colour_under_no_color(tmp_path: Path) -> None:
    env = plain_env(NO_COLOR="1")
    shown = in_a_terminal([str(CLI), "--db", "missing.db", "ls"], tmp_path, env)
    assert shown.startswith("cairnq: error: no cairnq database at "), shown
    assert "\x1b[" not in shown


@pytest.mark.slow
def test_an_error_line_has_no_colour_when_piped(tmp_path: Path) -> None:
    done = subprocess.run(
        [str(CLI), "--db", "missing.db", "ls"],
        cwd=tmp_path,
        env=plain_env(),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.stderr.startswith("cairnq: error: no cairnq database at "), done.stderr
    assert "\x1b[" not in done.stderr


@pytest.fixture
def terminal() -> Iterator[TextIO]:
    """A text stream on a real pseudo-terminal."""
    leader, follower = pty.openpty()
    with open(follower, "w") as stream:
        yield stream
    os.close(leader)


def record(level: int) -> logging.LogRecord:
    return logging.LogRecord("cairnq.worker", level, __file__, 1, "task x: failed", None, None)


def test_a_warning_level_is_yellow_and_an_error_red_on_a_terminal(
    terminal: TextIO, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("NO_COLOR", raising=False)
    monkeypatch.setenv("TERM", "xterm")
    formatter = LevelColours("%(levelname)s %(message)s", terminal)
    assert formatter.format(record(logging.WARNING)) == "\x1b[33mWARNING\x1b[0m task x: failed"
    assert formatter.format(record(logging.ERROR)) == "\x1b[1;31mERROR\x1b[0m task x: failed"
    assert formatter.format(record(logging.INFO)) == "INFO task x: failed"


def test_log_levels_have_no_colour_under_no_color(
    terminal: TextIO, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("NO_COLOR", "1")
    formatter = LevelColours("%(levelname)s %(message)s", terminal)
    assert formatter.format(record(logging.ERROR)) == "ERROR task x: failed"


def test_log_levels_have_no_colour_on_a_dumb_terminal(
    terminal: TextIO, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("NO_COLOR", raising=False)
    monkeypatch.setenv("TERM", "dumb")
    formatter = LevelColours("%(levelname)s %(message)s", terminal)
    assert formatter.format(record(logging.WARNING)) == "WARNING task x: failed"


def test_log_levels_have_no_colour_in_a_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("NO_COLOR", raising=False)
    monkeypatch.setenv("TERM", "xterm")
    with open(tmp_path / "worker.log", "w") as stream:
        formatter = LevelColours("%(levelname)s %(message)s", stream)
        assert formatter.format(record(logging.ERROR)) == "ERROR task x: failed"
