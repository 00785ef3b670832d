"""The integration pages' complete examples run as written, in a fresh directory on SQLite.

A page marks what is run: ```` ```python file=NAME ```` blocks are written to
NAME, ```` ```sh serve ```` starts a server in the background (its ``--port`` is
swapped for a free one), ```` ```sh run ```` lines run in order (``python`` is
this interpreter), and a following ```` ```text output ```` block is their
standard output. ``text output may-merge`` allows lines to be missing (progress
read by polling may skip a step) but not reordered, and the last line must match.
``sh run needs=A,B`` names what the example needs besides cairnq's core (an extra
of cairnq, or another package): ``tests/test_example_extras.py`` runs it again
with only those installed.
"""

from __future__ import annotations

import re
import shlex
import socket
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
BLOCK = re.compile(r"^```(\w+)([^\n]*)\n(.*?)^```", re.S | re.M)

pytestmark = pytest.mark.slow


@dataclass
class Example:
    files: dict[str, str] = field(default_factory=dict)
    serve: list[str] = field(default_factory=list)
    run: list[str] = field(default_factory=list)
    output: list[str] | None = None
    may_merge: bool = False
    needs: list[str] = field(default_factory=list)


def example_of(page: str) -> Example:
    example = Example()
    for language, info, body in BLOCK.findall((ROOT / "docs" / page).read_text()):
        words = info.split()
        if language == "python" and words and words[0].startswith("file="):
            example.files[words[0].removeprefix("file=")] = body
        elif language == "sh" and words == ["serve"]:
            example.serve += body.splitlines()
        elif language == "sh" and words[:1] == ["run"]:
            example.run += body.splitlines()
            example.needs += needs_of(words)
        elif language == "text" and words[:1] == ["output"]:
            example.output = body.splitlines()
            example.may_merge = "may-merge" in words
    assert example.files and example.run, f"docs/{page} marks no runnable example"
    return example


def needs_of(words: list[str]) -> list[str]:
    """What a block's ``needs=A,B`` word names (nothing without one)."""
    return [n for w in words if w.startswith("needs=") for n in w[6:].split(",") if n]


def argv(line: str, port: int, python: str = sys.executable) -> list[str]:
    words = shlex.split(line)
    assert words[0] == "python", f"an example command runs python: {line!r}"
    words = [python, *words[1:]]
    if "--port" in words:
        words[words.index("--port") + 1] = str(port)
    return [w.replace(":8000", f":{port}") for w in words]


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def wait_for_port(port: int, server: subprocess.Popen[str]) -> None:
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        assert server.poll() is None, "the example's server exited during start-up"
        with socket.socket() as sock:
            if sock.connect_ex(("127.0.0.1", port)) == 0:
                return
        time.sleep(0.05)
    raise AssertionError(f"the example's server did not listen on {port}")


def run_example(page: str, folder: Path, python: str = sys.executable) -> list[str]:
    """Run ``docs/page``'s example in ``folder`` with ``python``; what it printed."""
    example = example_of(page)
    for name, text in example.files.items():
        (folder / name).parent.mkdir(parents=True, exist_ok=True)
        (folder / name).write_text(text)
    port = free_port()
    servers = [
        subprocess.Popen(argv(line, port, python), cwd=folder, text=True, stderr=subprocess.DEVNULL)
        for line in example.serve
    ]
    try:
        for server in servers:
            wait_for_port(port, server)
        printed: list[str] = []
        for line in example.run:
            done = subprocess.run(
                argv(line, port, python), cwd=folder, capture_output=True, text=True, timeout=120
            )
            assert done.returncode == 0, f"{line}\n{done.stdout[-3000:]}{done.stderr[-3000:]}"
            printed += done.stdout.splitlines()
    finally:
        for server in servers:
            server.terminate()
            server.wait(30)
    if example.output is not None:
        if example.may_merge:
            assert printed and printed[-1] == example.output[-1], printed
            wanted = iter(example.output)
            assert all(line in wanted for line in printed), (printed, example.output)
        else:
            assert printed == example.output
    return printed


def test_the_django_page_example_enqueues_runs_and_reports_its_result(tmp_path: Path) -> None:
    pytest.importorskip("django")
    run_example("django.md", tmp_path)


def test_the_fastapi_page_example_streams_its_report_progress(tmp_path: Path) -> None:
    pytest.importorskip("fastapi")
    printed = run_example("fastapi.md", tmp_path)
    assert printed[-1].startswith("done: succeeded")


def test_the_testing_page_example_passes_under_pytest_with_the_plugin(tmp_path: Path) -> None:
    printed = run_example("testing.md", tmp_path)
    assert any("2 passed" in line for line in printed), printed


def test_the_events_page_example_waits_for_a_decision_sent_from_the_command_line(
    tmp_path: Path,
) -> None:
    printed = run_example("events-and-sleep.md", tmp_path)
    assert printed[-1] == "refund 42: paid, approved by ada"
