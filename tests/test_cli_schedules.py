"""``cairnq schedules``, run in-process through ``main(argv, out)`` on both backends.

The command opens its own client on the system clock; slots the tests need
decided are decided through a client on a ``FakeClock`` set past them.
"""

from __future__ import annotations

import json
import re

import pytest

from cairnq import SyncCairnQ
from cairnq.cli._render import iso
from cairnq.extensions.schedules import _ops as _schedules
from cairnq.extensions.schedules._model import ScheduleSpec
from cairnq.testing import FakeClock

from ._db import Database
from .test_cli import Result, run_on
from .test_without_extensions import protocol_only


@pytest.fixture
def cq(db: Database) -> SyncCairnQ:
    return db.sync_client().open()


def schedules(db: Database, capsys: pytest.CaptureFixture[str], *argv: str) -> Result:
    return run_on(db, capsys, "schedules", *argv)


def decide_slots(db: Database, name: str, slots: int) -> None:
    """Decide ``name``'s next ``slots`` slots (every one inside catch-up) as a worker would."""
    with db.sync_client() as reader:
        stored = reader.schedules.get(name)
    assert stored is not None and stored.every_ms is not None and stored.next_ms is not None
    clock = FakeClock(stored.next_ms + (slots - 1) * stored.every_ms)
    with db.sync_client(clock=clock) as cq:
        cq.schedules.run_due()


def test_add_stores_an_interval_schedule_and_says_when_it_runs_next(
    db: Database, capsys: pytest.CaptureFixture[str], cq: SyncCairnQ
) -> None:
    result = schedules(
        db, capsys, "add", "tick", "job", "--every", "10s", "--queue", "mail",
        "--payload", '{"a": 1}', "--priority", "5", "--max-attempts", "2",
        "--catch-up", "5m", "--catch-up-policy", "latest", "--overlap", "skip", "--jitter", "2s",
    )  # fmt: skip
    stored = cq.schedules.get("tick")
    assert stored is not None
    assert result.code == 0
    assert result.lines == [f"added schedule tick: job every 10s, next run {iso(stored.next_ms)}"]  # type: ignore[arg-type]
    assert (stored.queue, stored.payload, stored.priority, stored.max_attempts) == (
        "mail",
        {"a": 1},
        5,
        2,
    )
    assert (stored.catch_up_ms, stored.catch_up_policy, stored.overlap, stored.jitter_ms) == (
        300_000,
        "latest",
        "skip",
        2_000,
    )


def test_add_stores_a_cron_schedule_in_its_time_zone(
    db: Database, capsys: pytest.CaptureFixture[str], cq: SyncCairnQ
) -> None:
    result = schedules(
        db, capsys, "add", "nightly", "report", "--cron", "@daily", "--tz", "Asia/Tokyo"
    )
    stored = cq.schedules.get("nightly")
    assert result.code == 0 and stored is not None
    assert (stored.cron, stored.tz) == ("0 0 * * *", "Asia/Tokyo")


def test_a_cron_schedule_shows_its_times_in_its_own_zone_in_add_ls_and_history(
    db: Database, capsys: pytest.CaptureFixture[str], cq: SyncCairnQ
) -> None:
    added = schedules(
        db, capsys, "add", "nightly", "report", "--cron", "0 2 * * *", "--tz", "Europe/Paris"
    )
    stored = cq.schedules.get("nightly")
    assert stored is not None and stored.next_ms is not None
    # 02:00 in Paris: +01:00 in winter, +02:00 in summer.
    local = r"\d{4}-\d\d-\d\d 02:00:00\+0[12]:00 Europe/Paris"
    assert re.fullmatch(
        rf"added schedule nightly: report 0 2 \* \* \* \(Europe/Paris\), next run {local}",
        added.lines[0],
    )
    assert re.search(local, schedules(db, capsys, "ls").out)
    with db.sync_client(clock=FakeClock(stored.next_ms)) as worker_side:
        worker_side.schedules.run_due()
    assert re.search(rf"^{local} +enqueued", schedules(db, capsys, "history", "nightly").out, re.M)


def test_replacing_a_schedule_declared_in_code_warns_that_the_next_worker_start_restores_it(
    db: Database, capsys: pytest.CaptureFixture[str], cq: SyncCairnQ
) -> None:
    declared = ScheduleSpec.build(cq.codec, "tick", "job", every="10s")
    cq.backend.run(_schedules.put(declared, source="code", replace=False), write=True)
    result = schedules(db, capsys, "add", "tick", "job", "--every", "20s", "--replace")
    assert result.code == 0
    (line,) = result.err.splitlines()
    assert line.startswith("cairnq: warning: schedule tick is declared in worker code")
    quiet = schedules(db, capsys, "add", "tick", "job", "--every", "30s", "--replace")
    assert quiet.err == ""  # the operator's own schedule now


def test_add_of_a_taken_name_is_refused_and_names_replace(
    db: Database, capsys: pytest.CaptureFixture[str], cq: SyncCairnQ
) -> None:
    cq.schedules.add("tick", "job", every="10s")
    result = schedules(db, capsys, "add", "tick", "other", "--every", "20s")
    assert result.code == 1
    assert result.err.startswith("cairnq: error: a schedule named 'tick' exists")
    assert "--replace" in result.err and len(result.err.splitlines()) == 1
    assert cq.schedules.get("tick").task == "job"  # type: ignore[union-attr]


def test_add_with_replace_replaces_the_definition(
    db: Database, capsys: pytest.CaptureFixture[str], cq: SyncCairnQ
) -> None:
    cq.schedules.add("tick", "job", every="10s")
    result = schedules(db, capsys, "add", "tick", "other", "--every", "20s", "--replace")
    assert result.code == 0 and result.out.startswith("replaced schedule tick: other every 20s")
    assert cq.schedules.get("tick").task == "other"  # type: ignore[union-attr]


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--cron", "61 * * * *"], "invalid cron expression '61 * * * *'"),
        (["--cron", "0 9 * * *", "--tz", "Mars/Olympus"], "unknown time zone 'Mars/Olympus'"),
        (["--every=-5s"], "every: duration '-5s' is negative: give a length of time, such as '5s'"),
        (["--every", "-5m"], "every: duration '-5m' is negative: give a length of time"),
        (["--every", "10s", "--payload", "{nope"], "payload"),
        (["--every", "10s", "--jitter", "10s"], "jitter must be shorter than the interval"),
    ],
)
def test_add_refuses_bad_input_in_one_line_and_stores_nothing(
    db: Database,
    capsys: pytest.CaptureFixture[str],
    cq: SyncCairnQ,
    argv: list[str],
    message: str,
) -> None:
    result = schedules(db, capsys, "add", "tick", "job", *argv)
    assert result.code == 1
    assert len(result.err.splitlines()) == 1 and message in result.err
    assert cq.schedules.list() == []


def test_tz_without_cron_is_a_usage_error(
    db: Database, capsys: pytest.CaptureFixture[str], cq: SyncCairnQ
) -> None:
    result = schedules(db, capsys, "add", "tick", "job", "--every", "10s", "--tz", "UTC")
    assert result.code == 2 and "--tz applies to --cron only" in result.err
    assert cq.schedules.list() == []


def test_add_needs_exactly_one_of_cron_and_every(
    db: Database, capsys: pytest.CaptureFixture[str], cq: SyncCairnQ
) -> None:
    neither = schedules(db, capsys, "add", "tick", "job")
    both = schedules(db, capsys, "add", "tick", "job", "--every", "1s", "--cron", "@daily")
    assert (neither.code, both.code) == (2, 2)


def test_add_of_a_cron_schedule_without_the_cron_extra_says_which_extra(
    db: Database,
    capsys: pytest.CaptureFixture[str],
    cq: SyncCairnQ,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setitem(__import__("sys").modules, "cronsim", None)
    result = schedules(db, capsys, "add", "nightly", "report", "--cron", "@daily")
    assert result.code == 1
    assert '"cron" extra' in result.err and "--every" in result.err


def test_ls_lists_timing_queue_task_next_run_last_outcome_and_state(
    db: Database, capsys: pytest.CaptureFixture[str], cq: SyncCairnQ
) -> None:
    cq.schedules.add("tick", "job", every="10s", queue="mail")
    cq.schedules.add("nightly", "report", cron="0 2 * * *", tz="Europe/Paris", paused=True)
    decide_slots(db, "tick", 1)
    tick = cq.schedules.get("tick")
    assert tick is not None and tick.next_ms is not None and tick.last_slot_ms is not None
    result = schedules(db, capsys, "ls")
    header, nightly, tick_row = result.lines
    assert header.split() == [
        "NAME", "WHEN", "QUEUE", "TASK", "NEXT", "RUN", "LAST", "RUN", "OUTCOME", "STATE",
    ]  # fmt: skip
    assert nightly.split() == [
        "nightly", "0", "2", "*", "*", "*", "(Europe/Paris)", "default", "report",
        "-", "-", "-", "paused",
    ]  # fmt: skip
    assert tick_row.split() == [
        "tick", "every", "10s", "mail", "job", *iso(tick.next_ms).split(),
        *iso(tick.last_slot_ms).split(), "enqueued:", "queued", "active",
    ]  # fmt: skip


def test_ls_json_gives_each_schedule_with_its_last_slot(
    db: Database, capsys: pytest.CaptureFixture[str], cq: SyncCairnQ
) -> None:
    cq.schedules.add("tick", "job", every="10s")
    decide_slots(db, "tick", 2)
    [listed] = json.loads(schedules(db, capsys, "ls", "--json").out)
    assert (listed["name"], listed["when"], listed["paused"]) == ("tick", "every 10s", False)
    last = listed["last_slot"]
    assert (last["outcome"], last["task_status"]) == ("enqueued", "queued")
    assert last["slot_ms"] == listed["last_slot_ms"]


def test_ls_without_schedules_says_so(
    db: Database, capsys: pytest.CaptureFixture[str], cq: SyncCairnQ
) -> None:
    assert schedules(db, capsys, "ls").lines == ["no schedules"]


def test_pause_and_resume_change_the_paused_state(
    db: Database, capsys: pytest.CaptureFixture[str], cq: SyncCairnQ
) -> None:
    cq.schedules.add("tick", "job", every="10s")
    paused = schedules(db, capsys, "pause", "tick")
    assert paused.lines == ["paused schedule tick"]
    assert cq.schedules.get("tick").paused  # type: ignore[union-attr]
    resumed = schedules(db, capsys, "resume", "tick")
    assert resumed.code == 0 and resumed.out.startswith("resumed schedule tick: next run ")
    assert not cq.schedules.get("tick").paused  # type: ignore[union-attr]


def test_rm_removes_a_schedule(
    db: Database, capsys: pytest.CaptureFixture[str], cq: SyncCairnQ
) -> None:
    cq.schedules.add("tick", "job", every="10s")
    assert schedules(db, capsys, "rm", "tick").lines == ["removed schedule tick"]
    assert cq.schedules.list() == []


@pytest.mark.parametrize("action", ["pause", "resume", "rm", "history"])
def test_an_unknown_name_is_one_error_line_and_exit_1(
    db: Database, capsys: pytest.CaptureFixture[str], cq: SyncCairnQ, action: str
) -> None:
    result = schedules(db, capsys, action, "nope")
    assert result.code == 1
    assert result.err == "cairnq: error: no schedule named 'nope' (see `cairnq schedules ls`)\n"


def test_history_shows_slot_time_decision_task_and_status_newest_first(
    db: Database, capsys: pytest.CaptureFixture[str], cq: SyncCairnQ
) -> None:
    cq.schedules.add("tick", "job", every="10s")
    decide_slots(db, "tick", 3)
    slots = cq.schedules.history("tick")
    result = schedules(db, capsys, "history", "tick", "--limit", "2")
    assert result.lines[0].split() == ["SLOT", "DECISION", "TASK", "STATUS"]
    assert [line.split() for line in result.lines[1:]] == [
        [*iso(s.slot_ms).split(), "enqueued", str(s.task_id), "queued"] for s in slots[:2]
    ]


def test_history_json_gives_the_slot_decisions(
    db: Database, capsys: pytest.CaptureFixture[str], cq: SyncCairnQ
) -> None:
    cq.schedules.add("tick", "job", every="10s")
    decide_slots(db, "tick", 1)
    [slot] = json.loads(schedules(db, capsys, "history", "tick", "--json").out)
    assert (slot["schedule"], slot["outcome"], slot["task_status"]) == (
        "tick",
        "enqueued",
        "queued",
    )


def test_a_schedules_command_on_a_database_without_the_tables_says_to_migrate(
    db: Database, capsys: pytest.CaptureFixture[str]
) -> None:
    protocol_only(db)
    result = schedules(db, capsys, "ls")
    assert result.code == 1
    assert len(result.err.splitlines()) == 1
    assert "x0005_schedules.sql" in result.err and "run `cairnq migrate`" in result.err


def test_schedules_without_an_action_prints_its_help(
    db: Database, capsys: pytest.CaptureFixture[str], cq: SyncCairnQ
) -> None:
    result = schedules(db, capsys)
    assert result.code == 2 and "ls" in result.out and "history" in result.out
