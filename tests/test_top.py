"""``cairnq top``: frames rendered into a buffer, at times the test chooses.

A task is made ``running`` with a known progress by claiming it through the
low-level operations a worker uses, so what the frame must show is exact.
"""

from __future__ import annotations

import io
import json
import re
from datetime import datetime
from typing import Any

import pytest

from cairnq import Limit, SyncCairnQ, kernel
from cairnq.cli import main
from cairnq.extensions.limits._claim import ClaimGate
from cairnq.models import Lease, Task
from cairnq.testing import FakeClock
from cairnq.top import CLEAR_SCREEN, Frame, percent, progress_bar, render_frame, run_top

from ._db import Database
from .test_cli import db_args
from .test_without_extensions import protocol_only

WORKER_ID = "worker_top_test"
HEADERS = [
    "QUEUE",
    "QUEUED",
    "SCHEDULED",
    "WAITING",
    "RUNNING",
    "SUCCEEDED",
    "FAILED",
    "CANCELED",
    "DONE/S",
]


class Terminal(io.StringIO):
    """A text stream that says it is a terminal."""

    def isatty(self) -> bool:
        return True


@pytest.fixture
def cq(db: Database) -> SyncCairnQ:
    return db.sync_client().open()


def start(cq: SyncCairnQ, name: str, *, queue: str = "default") -> tuple[Task, Lease]:
    """Submit a task and claim it, as a worker would."""
    task = cq.submit(name, queue=queue)
    op = kernel.claim([queue], WORKER_ID, 60_000, [kernel.Draw([name], 1)], 100)
    rows = cq.backend.run(op, write=True)
    assert [r["id"] for r in rows] == [task.id]
    return task, Lease.of(rows[0])


def report(cq: SyncCairnQ, lease: Lease, value: float | None, message: str) -> None:
    cq.backend.run(kernel.progress(lease, WORKER_ID, value, message), write=True)


def finish(cq: SyncCairnQ, lease: Lease) -> None:
    cq.backend.run(kernel.complete(lease, WORKER_ID, json.dumps({"ok": True})), write=True)


def frame(cq: SyncCairnQ, now_ms: int, previous: Frame | None = None, **options: Any) -> str:
    out = io.StringIO()
    render_frame(cq, out, previous, now_ms, **options)
    return out.getvalue()


def queue_rows(text: str) -> dict[str, list[str]]:
    """The queue table of a frame: ``{queue: [counts..., done/s]}``."""
    lines = text.splitlines()
    at = next(i for i, line in enumerate(lines) if line.split() == HEADERS)
    rows = {}
    for line in lines[at + 1 :]:
        if not line.strip():
            break
        queue, *cells = line.split()
        rows[queue] = cells
    return rows


def running_rows(text: str) -> list[str]:
    lines = text.splitlines()
    at = next(
        i for i, line in enumerate(lines) if line.split()[:4] == ["ID", "NAME", "QUEUE", "PROGRESS"]
    )
    return [line for line in lines[at + 1 :] if line.strip() and not line.startswith("...")]


# --- what a frame shows ------------------------------------------------------------------


def test_refreshes_into_a_buffer_show_a_running_task_with_its_progress_bar_and_message(
    db: Database, cq: SyncCairnQ
) -> None:
    _, lease = start(cq, "images.resize")
    report(cq, lease, 0.42, "resizing 2/5")
    out = io.StringIO()
    frames = run_top(cq, out, interval=0.5, refreshes=3, sleep=lambda s: None)
    assert frames == 3
    last = out.getvalue().split("cairnq top")[-1]
    [row] = running_rows(last)
    assert row.split()[1:3] == ["images.resize", "default"]
    assert f"{progress_bar(0.42)}  42%" in row
    assert progress_bar(0.42) == "[########............]"
    assert row.endswith("resizing 2/5")
    assert WORKER_ID in row


def test_cairnq_top_command_renders_the_running_task_for_n_refreshes(
    db: Database, cq: SyncCairnQ, capsys: pytest.CaptureFixture[str]
) -> None:
    _, lease = start(cq, "audio.transcribe")
    report(cq, lease, 0.75, "transcribing")
    out = io.StringIO()
    code = main(["top", "-n", "2", "--interval", "0.01", *db_args(db)], out=out)
    assert code == 0
    text = out.getvalue()
    assert text.count("cairnq top") == 2
    [row] = running_rows(text.split("cairnq top")[-1])
    assert "75%" in row and "transcribing" in row and progress_bar(0.75) in row


def test_running_task_age_is_measured_from_its_creation(db: Database, cq: SyncCairnQ) -> None:
    task, _ = start(cq, "a")
    [row] = running_rows(frame(cq, task.created_at_ms + 125_000))
    assert row.split()[5] == "2m05s"


def test_running_task_without_progress_shows_an_empty_bar_and_a_dash(
    db: Database, cq: SyncCairnQ
) -> None:
    task, _ = start(cq, "a")
    [row] = running_rows(frame(cq, task.created_at_ms))
    assert f"{progress_bar(None)}    -" in row


def test_running_task_with_a_cancel_requested_says_so(db: Database, cq: SyncCairnQ) -> None:
    task, lease = start(cq, "a")
    report(cq, lease, 0.1, "working")
    cq.cancel(task.id)
    [row] = running_rows(frame(cq, task.created_at_ms))
    assert row.endswith("working  (cancel requested)")


def test_queue_table_counts_tasks_by_status_per_queue(db: Database, cq: SyncCairnQ) -> None:
    cq.submit("a")
    cq.cancel(cq.submit("b").id)
    start(cq, "c", queue="emails")
    rows = queue_rows(frame(cq, 1_000))
    assert rows == {
        "default": ["1", "0", "0", "0", "0", "0", "1", "-"],
        "emails": ["0", "0", "0", "1", "0", "0", "0", "-"],
    }


def test_first_frame_has_no_throughput_yet(db: Database, cq: SyncCairnQ) -> None:
    cq.cancel(cq.submit("a").id)
    assert queue_rows(frame(cq, 1_000))["default"][-1] == "-"


def test_throughput_is_tasks_finished_per_second_since_the_previous_frame(
    db: Database, cq: SyncCairnQ
) -> None:
    leases = [start(cq, f"t{i}")[1] for i in range(3)]
    first = render_frame(cq, io.StringIO(), None, 10_000)
    for lease in leases:
        finish(cq, lease)
    rows = queue_rows(frame(cq, 12_000, first))
    assert rows["default"] == ["0", "0", "0", "0", "3", "0", "0", "1.5"]


def test_throughput_counts_failed_and_canceled_as_finished(db: Database, cq: SyncCairnQ) -> None:
    queued = cq.submit("a")
    _, lease = start(cq, "b")
    first = render_frame(cq, io.StringIO(), None, 0)
    cq.cancel(queued.id)
    error = json.dumps({"type": "E", "code": "e", "message": "m", "retryable": False})
    cq.backend.run(kernel.fail(lease, WORKER_ID, error, retryable=False, delay_ms=0), write=True)
    assert queue_rows(frame(cq, 1_000, first))["default"][-1] == "2.0"


def test_throughput_never_goes_negative_when_finished_tasks_are_purged(
    db: Database, cq: SyncCairnQ
) -> None:
    cq.cancel(cq.submit("a").id)
    cq.submit("b")
    first = render_frame(cq, io.StringIO(), None, 0)
    previous = Frame(first.now_ms, {"default": {**first.stats["default"], "canceled": 5}})
    assert queue_rows(frame(cq, 1_000, previous))["default"][-1] == "0.0"


def test_queue_option_shows_only_that_queue(db: Database, cq: SyncCairnQ) -> None:
    start(cq, "a")
    start(cq, "b", queue="emails")
    text = frame(cq, 1_000, queue="emails")
    assert list(queue_rows(text)) == ["emails"]
    assert [row.split()[1] for row in running_rows(text)] == ["b"]


def test_more_running_tasks_than_shown_are_summarised(db: Database, cq: SyncCairnQ) -> None:
    for name in ("a", "b", "c"):
        start(cq, name)
    text = frame(cq, 1_000, max_running=1)
    assert len(running_rows(text)) == 1
    assert "... and 2 more" in text.splitlines()


def test_empty_database_frame_says_no_tasks(db: Database, cq: SyncCairnQ) -> None:
    lines = frame(cq, 1_000).splitlines()
    assert "no tasks" in lines
    assert "running: 0" in lines


def test_the_header_names_the_earliest_next_slot_of_the_schedules_not_paused(
    db: Database,
) -> None:
    # 08:00:10 UTC: five seconds before it is the same day in every zone.
    cq = db.sync_client(clock=FakeClock(1_800_000_000_001)).open()
    cq.schedules.add("hourly", "job", every="1h")
    cq.schedules.add("often", "job", every="10s")
    cq.schedules.add("halted", "job", every="1s", paused=True)
    often = cq.schedules.get("often")
    assert often is not None and often.next_ms is not None
    at = datetime.fromtimestamp(often.next_ms / 1000).astimezone().strftime("%H:%M:%S %Z")
    lines = frame(cq, often.next_ms - 5_000).splitlines()
    assert lines[1] == f"next schedule: often at {at} (in 5s)"


def test_a_due_next_slot_says_due_now(db: Database, cq: SyncCairnQ) -> None:
    often = cq.schedules.add("often", "job", every="10s")
    assert often.next_ms is not None
    assert frame(cq, often.next_ms + 1).splitlines()[1].endswith("(due now)")


def test_a_frame_without_schedules_shows_no_schedule_line(db: Database, cq: SyncCairnQ) -> None:
    cq.schedules.add("halted", "job", every="1s", paused=True)
    assert "next schedule" not in frame(cq, 1_000)


def test_a_frame_on_a_database_without_the_schedules_tables_shows_the_rest(
    db: Database,
) -> None:
    protocol_only(db)
    with db.sync_client(migrate=False) as cq:
        cq.submit("a")
        text = frame(cq, 1_000)
    assert "next schedule" not in text
    assert queue_rows(text)["default"][0] == "1"


def limited(cq: SyncCairnQ, *limits: Limit, want: int = 100, queue: str = "default") -> int:
    """Store ``limits`` and claim up to ``want`` due tasks under them, as a worker would."""
    for limit in limits:
        cq.limits.set(limit)
    gate = ClaimGate(list(limits))
    op = kernel.claim(
        [queue],
        WORKER_ID,
        60_000,
        [kernel.Draw(None, want)],
        100,
        points=kernel.claiming_with(gate),
    )
    return len(cq.backend.run(op, write=True))


def limit_rows(text: str) -> dict[str, list[str]]:
    """The limits section of a frame: ``{limit id: [on, rule, waiting, in use]}``."""
    lines = text.splitlines()
    at = lines.index("limits:")
    assert lines[at + 1].split() == ["LIMIT", "ON", "RULE", "WAITING", "IN", "USE"]
    rows = {}
    for line in lines[at + 2 :]:
        if not line.strip():
            break
        limit_id, *cells = re.split(r"\s{2,}", line.strip())
        rows[limit_id] = cells
    return rows


def test_a_limit_per_key_shows_its_busiest_keys_used_over_the_limit_and_the_waiting_count(
    db: Database, cq: SyncCairnQ
) -> None:
    for customer, count in (("a", 5), ("b", 1), ("c", 2), ("d", 2)):
        cq.submit_many([("job", {"customer": customer}) for _ in range(count)])
    limit = Limit.concurrency(2, queue="default", key="payload.customer", id="per-customer")
    assert limited(cq, limit) == 7
    # a's three tasks over its limit wait.
    assert limit_rows(frame(cq, 1_000))["per-customer"] == [
        "queue default",
        "2 at once per payload.customer",
        "3",
        "a 2/2, c 2/2, d 2/2, +1 keys",
    ]


def test_a_limit_without_a_key_shows_running_over_the_limit(db: Database, cq: SyncCairnQ) -> None:
    cq.submit_many([("job", None) for _ in range(4)])
    assert limited(cq, Limit.concurrency(3, name="job", id="jobs")) == 3
    assert limit_rows(frame(cq, 1_000))["jobs"] == ["task job", "3 at once", "1", "3/3"]


def test_a_rate_limit_shows_its_rule_and_the_tokens_left(db: Database, cq: SyncCairnQ) -> None:
    cq.submit_many([("job", None) for _ in range(4)])
    rate = Limit.rate(1, per="1h", burst=2, queue="default", id="slow")
    assert limited(cq, rate) == 2
    assert limit_rows(frame(cq, 1_000))["slow"] == [
        "queue default",
        "1/1h00m burst 2",
        "2",
        "tokens 0.0/2",
    ]


def test_limits_of_other_queues_are_left_out_with_the_queue_option(
    db: Database, cq: SyncCairnQ
) -> None:
    cq.limits.set(Limit.concurrency(1, queue="mail", id="mail"))
    cq.limits.set(Limit.concurrency(1, queue="sms", id="sms"))
    assert set(limit_rows(frame(cq, 1_000, queue="mail"))) == {"mail"}


def test_a_frame_without_limits_has_no_limits_section(db: Database, cq: SyncCairnQ) -> None:
    cq.submit("a")
    assert "limits:" not in frame(cq, 1_000)


def test_a_frame_on_a_database_without_the_limits_tables_shows_the_rest(db: Database) -> None:
    protocol_only(db)
    with db.sync_client(migrate=False) as cq:
        cq.submit("a")
        text = frame(cq, 1_000)
    assert "limits:" not in text
    assert queue_rows(text)["default"][0] == "1"


def test_lines_are_cut_to_the_given_width(db: Database, cq: SyncCairnQ) -> None:
    _, lease = start(cq, "a")
    report(cq, lease, 0.5, "x" * 300)
    assert max(len(line) for line in frame(cq, 1_000, width=60).splitlines()) == 60


# --- the stream --------------------------------------------------------------------------


def test_frame_on_a_terminal_starts_by_clearing_the_screen(db: Database, cq: SyncCairnQ) -> None:
    out = Terminal()
    render_frame(cq, out, None, 1_000)
    assert out.getvalue().startswith(CLEAR_SCREEN + "cairnq top")


def test_frame_on_a_plain_stream_has_no_escape_codes(db: Database, cq: SyncCairnQ) -> None:
    start(cq, "a")
    assert "\x1b" not in frame(cq, 1_000)


def test_run_top_sleeps_the_interval_between_refreshes_but_not_after_the_last(
    db: Database, cq: SyncCairnQ
) -> None:
    naps: list[float] = []
    run_top(cq, io.StringIO(), interval=1.5, refreshes=3, sleep=naps.append)
    assert naps == [1.5, 1.5]


def test_run_top_feeds_each_frame_the_previous_one(db: Database, cq: SyncCairnQ) -> None:
    leases = [start(cq, f"t{i}")[1] for i in range(4)]
    times = iter([0, 2_000])

    def finish_all(seconds: float) -> None:
        for lease in leases:
            finish(cq, lease)

    out = io.StringIO()
    run_top(cq, out, refreshes=2, sleep=finish_all, clock=lambda: next(times))
    second = out.getvalue().split("cairnq top")[-1]
    assert queue_rows(second)["default"][-1] == "2.0"


def test_top_interval_must_be_positive(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["top", "--interval", "0"], out=io.StringIO()) == 2
    assert capsys.readouterr().err.startswith("cairnq: error: argument --interval")


# --- progress as text --------------------------------------------------------------------


@pytest.mark.parametrize(
    ("fraction", "bar", "text"),
    [
        (None, "[" + "." * 20 + "]", "-"),
        (0.0, "[" + "." * 20 + "]", "0%"),
        (0.5, "[" + "#" * 10 + "." * 10 + "]", "50%"),
        (1.0, "[" + "#" * 20 + "]", "100%"),
        (1.7, "[" + "#" * 20 + "]", "100%"),
        (-0.2, "[" + "." * 20 + "]", "0%"),
    ],
)
def test_progress_is_drawn_as_a_bar_and_a_percentage(
    fraction: float | None, bar: str, text: str
) -> None:
    assert (progress_bar(fraction), percent(fraction)) == (bar, text)


# --- ids, scheduled tasks, unserved tasks, keys ------------------------------------------


def test_running_tasks_show_their_task_id(db: Database, cq: SyncCairnQ) -> None:
    task, _ = start(cq, "images.resize")
    [row] = running_rows(frame(cq, task.created_at_ms))
    assert row.split()[0] == task.id


def test_queued_tasks_not_yet_due_count_as_scheduled_not_queued(
    db: Database, cq: SyncCairnQ
) -> None:
    cq.submit("later", delay_ms=3_600_000)
    cq.submit("now")
    queued, scheduled = queue_rows(frame(cq, 1_000))["default"][:2]
    assert (queued, scheduled) == ("1", "1")


def test_tasks_parked_on_a_dependency_count_as_waiting_not_scheduled(
    db: Database, cq: SyncCairnQ
) -> None:
    first = cq.submit("first")
    cq.submit("after", depends_on=[first.id])
    cq.submit("later", delay_ms=3_600_000)
    queued, scheduled, held = queue_rows(frame(cq, 1_000))["default"][:3]
    assert (queued, scheduled, held) == ("1", "1", "1")


def test_due_tasks_no_live_worker_serves_are_flagged_one_line_per_name_and_queue(
    db: Database, cq: SyncCairnQ
) -> None:
    for _ in range(3):
        cq.submit("emial.send")
    cq.submit("report", queue="nobody")
    lines = [line for line in frame(cq, 1_000).splitlines() if line.startswith("unserved:")]
    assert lines == [
        "unserved: emial.send on default: 3 queued, no live worker serves the queue",
        "unserved: report on nobody: 1 queued, no live worker serves the queue",
    ]


async def test_a_name_a_live_worker_serves_is_not_flagged(db: Database, cq: SyncCairnQ) -> None:
    from cairnq.testing import FakeClock

    from .test_orphans import present

    await present(db, FakeClock(), "w-mail", ["default"], ["email.send"])
    cq.submit("email.send")
    cq.submit("emial.send")
    lines = [line for line in frame(cq, 1_000).splitlines() if line.startswith("unserved:")]
    assert lines == [
        "unserved: emial.send on default: 1 queued, no live worker has a handler for it"
    ]


def test_q_quits_top_at_once_without_waiting_out_the_interval(db: Database, cq: SyncCairnQ) -> None:
    pressed: list[float] = []

    def keys(timeout: float) -> str | None:
        pressed.append(timeout)
        return "q"

    assert run_top(cq, io.StringIO(), interval=30.0, keys=keys) == 1
    assert len(pressed) == 1


def test_other_keys_do_not_quit_top(db: Database, cq: SyncCairnQ) -> None:
    assert run_top(cq, io.StringIO(), interval=0.01, refreshes=2, keys=lambda t: "x") == 2


def test_top_reads_no_keys_when_stdin_is_not_a_terminal(monkeypatch: pytest.MonkeyPatch) -> None:
    from cairnq.top import terminal_keys

    monkeypatch.setattr("sys.stdin", io.StringIO("q"))
    with terminal_keys() as keys:
        assert keys is None


def test_a_signal_during_a_draw_lets_the_draw_finish_and_top_exits_at_the_key_wait(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import os
    import pty
    import signal
    import termios

    from cairnq.top import terminal_keys

    master, slave = pty.openpty()
    try:
        monkeypatch.setattr("sys.stdin", os.fdopen(slave, "r", closefd=False))
        drawn = False
        code: object = None
        try:
            with terminal_keys() as keys:
                assert keys is not None
                # The draw holds the client's locks; a signal must not unwind it midway.
                os.kill(os.getpid(), signal.SIGTERM)
                drawn = True
                keys(30.0)
        except SystemExit as exited:
            code = exited.code
        assert drawn
        assert code == 128 + signal.SIGTERM
        assert termios.tcgetattr(slave)[3] & termios.ICANON
        assert signal.getsignal(signal.SIGTERM) is signal.SIG_DFL
    finally:
        os.close(slave)
        os.close(master)


EXIT_HANG_LIMIT_S = 30


class _Screen:
    """What a program writes to a pty, read as it comes, as a terminal does: a program
    whose output nobody reads blocks in its writes, and then in restoring the terminal."""

    def __init__(self, master: int) -> None:
        import threading

        self._master = master
        self._data = b""
        self._more = threading.Condition()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        import os

        while True:
            try:
                chunk = os.read(self._master, 4096)
            except OSError:  # the program and the test closed their ends
                return
            if not chunk:
                return
            with self._more:
                self._data += chunk
                self._more.notify_all()

    def text(self) -> str:
        with self._more:
            return self._data.decode(errors="replace")

    def shows(self, text: bytes, timeout: float = 30.0) -> bool:
        with self._more:
            return self._more.wait_for(lambda: text in self._data, timeout)


@pytest.mark.slow
def test_cairnq_top_on_a_terminal_quits_when_q_is_pressed(db: Database, cq: SyncCairnQ) -> None:
    import os
    import pty
    import subprocess
    import sys
    from pathlib import Path

    cq.submit("a")
    script = Path(sys.executable).parent / "cairnq"
    master, slave = pty.openpty()
    env = {k: v for k, v in os.environ.items() if k != "CAIRNQ_DATABASE_URL"}
    proc = subprocess.Popen(
        [str(script), "top", "--interval", "60", *db_args(db)],
        stdin=slave,
        stdout=slave,
        stderr=slave,
        env=env,
    )
    os.close(slave)
    try:
        assert _Screen(master).shows(b"cairnq top")
        os.write(master, b"q")
        # An upper bound on noticing the key, far below the 60 s interval.
        assert proc.wait(timeout=5) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        os.close(master)


@pytest.mark.parametrize("sig", ["SIGTERM", "SIGHUP"])
def test_cairnq_top_restores_the_terminal_when_killed_by_a_signal(
    sig: str, db: Database, cq: SyncCairnQ
) -> None:
    import os
    import pty
    import signal
    import subprocess
    import sys
    import termios
    from pathlib import Path

    cq.submit("a")
    script = Path(sys.executable).parent / "cairnq"
    master, slave = pty.openpty()
    env = {k: v for k, v in os.environ.items() if k != "CAIRNQ_DATABASE_URL"}
    env["PYTHONFAULTHANDLER"] = "1"  # a hang below shows where
    proc = subprocess.Popen(
        [str(script), "top", "--interval", "60", *db_args(db)],
        stdin=slave,
        stdout=slave,
        stderr=slave,
        env=env,
        start_new_session=True,
    )

    def line_mode() -> bool:
        return bool(termios.tcgetattr(slave)[3] & termios.ICANON)

    screen = _Screen(master)
    try:
        assert screen.shows(b"cairnq top")
        assert not line_mode()  # top reads single keys
        proc.send_signal(getattr(signal, sig))
        # A hang limit, not a timing: a process importing cairnq can take seconds to
        # start and to end on a loaded machine (the suite runs beside other processes).
        try:
            code = proc.wait(timeout=EXIT_HANG_LIMIT_S)
        except subprocess.TimeoutExpired:
            # Hung: SIGABRT makes its faulthandler print every thread's stack to the pty.
            proc.send_signal(signal.SIGABRT)
            proc.wait(timeout=EXIT_HANG_LIMIT_S)
            screen.shows(b"most recent call first", timeout=5)
            raise AssertionError(f"cairnq top hung after {sig}:\n{screen.text()[-6000:]}") from None
        assert code == 128 + getattr(signal, sig)
        attrs = termios.tcgetattr(slave)
        assert attrs[3] & termios.ICANON and attrs[3] & termios.ECHO
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        os.close(slave)
        os.close(master)
