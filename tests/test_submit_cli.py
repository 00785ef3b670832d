"""``cairnq submit`` never leaves a user in silence: unserved warnings and ``--wait`` feedback.

The behaviours a user meets at the terminal run the installed ``cairnq`` script
in a subprocess; the rest run ``main`` in-process. Both backends.
"""

from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from cairnq import SyncCairnQ
from cairnq.cli import _tasks
from cairnq.testing import FakeClock

from ._db import Database
from ._streams import Lines
from .test_cli import db_args, run_on
from .test_orphans import present

SCRIPT = Path(sys.executable).parent / "cairnq"
# The bound on how soon a mistake is reported: an upper bound, not a speed claim.
REPORTED_WITHIN_S = 5.0
# How long a test waits for a line whose timing it does not test: on a loaded machine a new
# interpreter alone can take seconds to start.
PRINTED_WITHIN_S = 30.0


@pytest.fixture
def cq(db: Database) -> SyncCairnQ:
    """A client on ``db``, which it creates and migrates."""
    return db.sync_client().open()


class Command:
    """The installed ``cairnq`` script, running."""

    def __init__(self, db: Database, cwd: Path, *argv: str) -> None:
        env = {k: v for k, v in os.environ.items() if k != "CAIRNQ_DATABASE_URL"}
        self.proc = subprocess.Popen(
            [str(SCRIPT), *argv, *db_args(db)],
            cwd=cwd,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        assert self.proc.stdout is not None and self.proc.stderr is not None
        self.out = Lines(self.proc.stdout)
        self.err = Lines(self.proc.stderr)

    def wait(self, within_s: float = 60) -> int:
        return self.proc.wait(timeout=within_s)

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait(timeout=60)
        self.out.close()
        self.err.close()


@pytest.fixture
def command(db: Database, cq: SyncCairnQ, tmp_path: Path) -> Any:
    started: list[Command] = []

    def start(*argv: str) -> Command:
        started.append(Command(db, tmp_path, *argv))
        return started[-1]

    yield start
    for each in started:
        each.stop()


# --- the unserved warning ------------------------------------------------------------------------


def test_submit_of_a_name_no_worker_serves_warns_on_stderr_within_5_seconds(command: Any) -> None:
    run = command("submit", "emial.send", "{}")
    line = run.err.until("cairnq: warning:", REPORTED_WITHIN_S)
    assert "'emial.send'" in line and "stays queued" in line
    assert run.wait() == 0


def test_submit_to_a_queue_no_worker_serves_warns_on_stderr_within_5_seconds(
    command: Any,
) -> None:
    run = command("submit", "email.send", "--queue", "emial")
    line = run.err.until("cairnq: warning:", REPORTED_WITHIN_S)
    assert "queue 'emial'" in line
    assert run.wait() == 0


def test_the_unserved_warning_names_the_database(
    db: Database, cq: SyncCairnQ, capsys: pytest.CaptureFixture[str]
) -> None:
    result = run_on(db, capsys, "submit", "emial.send")
    assert cq._where() in result.err


def test_the_unserved_warning_suggests_the_closest_name_a_live_worker_serves(
    db: Database, cq: SyncCairnQ, capsys: pytest.CaptureFixture[str]
) -> None:
    import asyncio

    asyncio.run(present(db, FakeClock(), "w-mail", ["default"], ["email.send"]))
    result = run_on(db, capsys, "submit", "emial.send")
    assert "did you mean 'email.send'?" in result.err


def test_submit_warns_once_on_one_stderr_line(
    db: Database, cq: SyncCairnQ, capsys: pytest.CaptureFixture[str]
) -> None:
    result = run_on(db, capsys, "submit", "emial.send")
    assert len(result.err.splitlines()) == 1


def test_submit_with_no_warn_unserved_prints_no_warning(
    db: Database, cq: SyncCairnQ, capsys: pytest.CaptureFixture[str]
) -> None:
    result = run_on(db, capsys, "submit", "emial.send", "--no-warn-unserved")
    assert result.code == 0 and result.err == ""


async def test_submit_of_a_task_a_live_worker_serves_prints_no_warning(
    db: Database, cq: SyncCairnQ, capsys: pytest.CaptureFixture[str]
) -> None:
    await present(db, FakeClock(), "w-mail", ["default"], ["email.send"])
    result = run_on(db, capsys, "submit", "email.send")
    assert result.code == 0 and result.err == ""


# --- submit --wait -------------------------------------------------------------------------------


def test_submit_wait_prints_the_id_and_status_before_the_task_finishes(command: Any) -> None:
    run = command("submit", "nobody.serves", "--wait", "--no-warn-unserved")
    line = run.out.until("task_", PRINTED_WITHIN_S)
    assert line.endswith(" queued")
    assert run.proc.poll() is None  # still waiting: the line came first


def test_submit_wait_says_what_it_waits_for_on_which_database_and_how_to_stop(
    command: Any, cq: SyncCairnQ
) -> None:
    run = command("submit", "nobody.serves", "--wait", "--no-warn-unserved")
    task_id = run.out.until("task_", PRINTED_WITHIN_S).split()[0]
    line = run.err.until("waiting for", PRINTED_WITHIN_S)
    assert line == (
        f"waiting for {task_id} on {cq._where()}; Ctrl-C stops waiting, the task stays queued"
    )


def test_submit_wait_reports_an_unclaimed_task_naming_the_database_without_a_timeout(
    command: Any, cq: SyncCairnQ
) -> None:
    run = command("submit", "nobody.serves", "--wait", "--no-warn-unserved")
    line = run.err.until("never claimed", _tasks.DIAGNOSE_AFTER_MS / 1000 + PRINTED_WITHIN_S)
    assert "queue 'default'" in line and "'nobody.serves'" in line
    assert cq._where() in line


def test_ctrl_c_during_submit_wait_prints_the_id_and_how_to_follow_it_and_exits_130(
    command: Any,
) -> None:
    run = command("submit", "nobody.serves", "--wait", "--no-warn-unserved")
    task_id = run.out.until("task_", PRINTED_WITHIN_S).split()[0]
    run.err.until("waiting for", PRINTED_WITHIN_S)
    run.proc.send_signal(signal.SIGINT)
    assert run.wait() == 130
    line = run.err.until("stopped waiting", PRINTED_WITHIN_S)
    assert f"{task_id} is queued" in line and f"cairnq get {task_id}" in line


def test_the_task_stays_queued_after_ctrl_c(command: Any, cq: SyncCairnQ) -> None:
    run = command("submit", "nobody.serves", "--wait", "--no-warn-unserved")
    task_id = run.out.until("task_", PRINTED_WITHIN_S).split()[0]
    run.err.until("waiting for", PRINTED_WITHIN_S)
    run.proc.send_signal(signal.SIGINT)
    run.wait()
    task = cq.get(task_id)
    assert task is not None and task.status == "queued"


def test_submit_wait_gives_up_after_the_default_wait_and_says_so(
    db: Database, cq: SyncCairnQ, capsys: pytest.CaptureFixture[str], monkeypatch: Any
) -> None:
    monkeypatch.setattr(_tasks, "WAIT_TIMEOUT_MS", 0)
    result = run_on(db, capsys, "submit", "nobody.serves", "--wait", "--no-warn-unserved")
    last = result.err.splitlines()[-1]
    assert result.code == 1
    assert "did not finish within 0 ms (the --wait default; --timeout sets another)" in last
    assert "cairnq get task_" in last


def test_the_default_wait_is_a_minute() -> None:
    assert _tasks.WAIT_TIMEOUT_MS == 60_000


def test_the_follow_hint_repeats_the_database_but_never_a_password() -> None:
    plain = argparse.Namespace(db="sqlite:///jobs.db", schema=None)
    secret = argparse.Namespace(db="postgresql://app:hunter2@db/app", schema="jobs")
    assert _tasks._follow_hint(plain, "task_1") == "cairnq get task_1 --db sqlite:///jobs.db"
    hint = _tasks._follow_hint(secret, "task_1")
    assert "hunter2" not in hint and hint.endswith("--schema jobs")


# --- the library's wait diagnosis ----------------------------------------------------------------


def test_a_wait_that_times_out_on_an_unclaimed_task_names_the_database(
    db: Database, cq: SyncCairnQ
) -> None:
    from cairnq import TaskTimeout

    task = cq.submit("nobody.serves")
    with pytest.raises(TaskTimeout) as caught:
        cq.wait(task.id, timeout_ms=0)
    assert f"with a handler for 'nobody.serves' on {cq._where()}?" in str(caught.value)


def test_submit_wait_on_a_delayed_task_says_it_is_delayed_not_that_it_was_never_claimed(
    db: Database, cq: SyncCairnQ, capsys: pytest.CaptureFixture[str], monkeypatch: Any
) -> None:
    monkeypatch.setattr(_tasks, "DIAGNOSE_AFTER_MS", 0)
    result = run_on(
        db, capsys, "submit", "nobody.serves", "--delay", "5m", "--wait", "--timeout", "1s",
        "--no-warn-unserved",
    )  # fmt: skip
    assert result.code == 1
    lines = result.err.splitlines()
    assert any(" is delayed: no worker may claim it before it is due, in 4m5" in ln for ln in lines)
    assert not any("never claimed" in line for line in lines)
    assert "it was submitted with a delay" in lines[-1]


def test_the_default_wait_of_a_delayed_task_starts_when_it_is_due(
    db: Database, cq: SyncCairnQ, capsys: pytest.CaptureFixture[str], monkeypatch: Any
) -> None:
    seen: list[int] = []

    def wait(client: Any, task: Any, most_ms: int, *args: Any, **options: Any) -> Any:
        seen.append(most_ms)
        return task

    monkeypatch.setattr(_tasks, "WAIT_TIMEOUT_MS", 0)
    monkeypatch.setattr(_tasks, "_wait", wait)
    run_on(db, capsys, "submit", "job", "--delay", "5m", "--wait", "--no-warn-unserved")
    (limit,) = seen
    # The wait starts at the delay's end: the default wait (0 here) is added to it.
    assert 290_000 < limit <= 300_000
