"""A schedule's options: one object (``ScheduleOptions``) and its keywords (``ScheduleKeywords``),
taken by every entry and checked in one place; and the flat client methods before
``cq.schedules``, kept for one release, each still working and warning once."""

from __future__ import annotations

import ast
import dataclasses
import datetime
import warnings
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any, get_type_hints

import pytest

import cairnq
from cairnq import CairnQ, InvalidArgument, SyncCairnQ
from cairnq._deprecated import CairnQDeprecationWarning, forget_warnings
from cairnq._json import JsonCodec
from cairnq.extensions.schedules._client_async import AsyncSchedules
from cairnq.schedules import ScheduleKeywords, ScheduleOptions, ScheduleSpec, Timing
from cairnq.testing import FakeClock

from ._db import Database

START = 1_800_000_000_000

BAD = [
    pytest.param({"every": "10s", "catch_up_policy": "some"}, id="catch_up_policy"),
    pytest.param({"every": "10s", "overlap": "never"}, id="overlap"),
    pytest.param({"every": "10s", "jitter": "10s"}, id="jitter"),
    pytest.param({"every": "-5s"}, id="every"),
    pytest.param({"every": "10s", "tz": "Europe/Paris"}, id="tz"),
    pytest.param({"every": "10s", "catch_up": "0s"}, id="catch_up"),
    pytest.param({"every": "10s", "max_attempts": 0}, id="max_attempts"),
    pytest.param({"every": "10s", "queue": ""}, id="queue"),
    pytest.param({}, id="neither-cron-nor-every"),
]

# The options only a schedule takes: a signature with three of them spells the list out.
SCHEDULE_ONLY = {"cron", "every", "catch_up", "catch_up_policy", "overlap", "jitter"}


def _refusal(options: dict[str, Any]) -> str:
    with pytest.raises(InvalidArgument) as refused:
        ScheduleOptions(**options)
    return str(refused.value)


async def _definition(cq: CairnQ, name: str) -> dict[str, Any]:
    stored = await cq.schedules.get(name)
    assert stored is not None
    skip = {"name", "cursor_ms", "next_ms", "created_at_ms", "updated_at_ms"}
    return {k: v for k, v in stored.to_dict().items() if k not in skip}


# --- one list ------------------------------------------------------------------------------


def test_the_keywords_and_the_options_object_name_the_same_options_with_the_same_types() -> None:
    fields = {
        f.name: get_type_hints(ScheduleOptions)[f.name] for f in dataclasses.fields(ScheduleOptions)
    }
    assert get_type_hints(ScheduleKeywords) == fields
    assert list(ScheduleKeywords.__annotations__) == list(fields)


def _spelling_out(source: str) -> list[str]:
    """The functions of ``source`` whose parameters spell the schedule options out."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            a = node.args
            names = {p.arg for p in [*a.posonlyargs, *a.args, *a.kwonlyargs]}
            if len(names & SCHEDULE_ONLY) >= 3:
                found.append(node.name)
    return found


def test_no_function_of_the_package_spells_the_schedule_options_out() -> None:
    package = Path(cairnq.__file__).parent
    spelled = {
        f"{path.relative_to(package)}:{name}"
        for path in package.rglob("*.py")
        for name in _spelling_out(path.read_text())
    }
    assert spelled == set()


def test_the_spelling_scan_would_see_a_signature_listing_the_options() -> None:
    source = "async def add_schedule(self, name, *, every=None, catch_up=1, overlap='allow'): ..."
    assert _spelling_out(source) == ["add_schedule"]


# --- one check -----------------------------------------------------------------------------


@pytest.mark.parametrize("options", BAD)
async def test_cq_schedules_add_refuses_a_bad_option_with_the_options_message(
    db: Database, options: dict[str, Any]
) -> None:
    async with db.client() as cq:
        with pytest.raises(InvalidArgument) as refused:
            await cq.schedules.add("tick", "job", **options)
        assert str(refused.value) == _refusal(options)
        assert await cq.schedules.list() == []


@pytest.mark.parametrize("options", BAD)
def test_worker_periodic_refuses_a_bad_option_with_the_options_message(
    db: Database, options: dict[str, Any]
) -> None:
    worker = db.worker()
    with pytest.raises(InvalidArgument) as refused:

        @worker.periodic(**options)
        async def tick(ctx: Any) -> None: ...

    assert str(refused.value) == _refusal(options)
    assert (worker.registry.names(), worker.schedules) == ([], [])


@pytest.mark.parametrize("options", BAD)
def test_worker_schedule_refuses_a_bad_option_with_the_options_message(
    db: Database, options: dict[str, Any]
) -> None:
    worker = db.worker()
    with pytest.raises(InvalidArgument) as refused:
        worker.schedule("tick", "job", **options)
    assert str(refused.value) == _refusal(options)
    assert worker.schedules == []


@pytest.mark.parametrize("options", BAD)
def test_schedule_spec_build_refuses_a_bad_option_with_the_options_message(
    options: dict[str, Any],
) -> None:
    with pytest.raises(InvalidArgument) as refused:
        ScheduleSpec.build(JsonCodec(), "tick", "job", **options)
    assert str(refused.value) == _refusal(options)


def test_keywords_beside_an_options_object_are_checked_with_it() -> None:
    with pytest.raises(InvalidArgument, match="jitter must be shorter than the interval"):
        ScheduleSpec.build(JsonCodec(), "tick", "job", ScheduleOptions(every="10s"), jitter="10s")


def test_options_given_as_a_dict_instead_of_an_options_object_are_refused() -> None:
    with pytest.raises(InvalidArgument, match="must be a ScheduleOptions, or keywords"):
        ScheduleSpec.build(JsonCodec(), "tick", "job", {"every": "10s"})  # type: ignore[arg-type]


def test_an_options_object_keeps_what_it_was_given_and_a_replacement_is_checked_again() -> None:
    options = ScheduleOptions(every="90s", catch_up=datetime.timedelta(hours=2))
    assert (options.every, options.catch_up, options.queue) == (
        "90s",
        datetime.timedelta(hours=2),
        None,
    )
    assert options == ScheduleOptions(every="90s", catch_up=datetime.timedelta(hours=2))
    with pytest.raises(InvalidArgument, match="jitter must be shorter than the interval"):
        dataclasses.replace(options, jitter="90s")


# --- one object, every entry ---------------------------------------------------------------


async def test_cq_schedules_add_stores_the_same_schedule_from_an_options_object_as_from_keywords(
    db: Database,
) -> None:
    keywords: dict[str, Any] = {
        "every": "90s",
        "payload": {"a": 1},
        "priority": 5,
        "max_attempts": 7,
        "metadata": {"team": "ops"},
        "catch_up": "2h",
        "catch_up_policy": "latest",
        "overlap": "skip",
        "jitter": "5s",
        "queue": "mail",
    }
    async with db.client(clock=FakeClock(START)) as cq:
        await cq.schedules.add("by-keywords", "job", **keywords)
        await cq.schedules.add("by-object", "job", ScheduleOptions(**keywords))
        assert await _definition(cq, "by-object") == await _definition(cq, "by-keywords")


async def test_keywords_beside_an_options_object_replace_its_fields(db: Database) -> None:
    nightly = ScheduleOptions(cron="0 2 * * *", tz="Europe/Paris", queue="reports")
    async with db.client() as cq:
        stored = await cq.schedules.add("nightly", "export.run", nightly, queue="exports")
    assert (stored.cron, stored.tz, stored.queue) == ("0 2 * * *", "Europe/Paris", "exports")


async def test_a_client_schedule_without_a_queue_goes_to_the_default_queue(db: Database) -> None:
    async with db.client() as cq:
        stored = await cq.schedules.add("tick", "job", ScheduleOptions(every="10s"))
    assert (stored.queue, stored.catch_up_ms, stored.priority, stored.max_attempts) == (
        "default",
        3_600_000,
        0,
        3,
    )


def test_worker_periodic_takes_an_options_object_first(db: Database) -> None:
    worker = db.worker(queues=["mail", "other"])
    hourly = ScheduleOptions(every="1h", payload={"n": 1})

    @worker.periodic(hourly, priority=4)
    async def tick(ctx: Any) -> None: ...

    [spec] = worker.schedules
    assert (spec.name, spec.task, spec.timing.every_ms, spec.priority) == (
        "tick",
        "tick",
        3_600_000,
        4,
    )
    assert (spec.queue, spec.payload) == ("mail", '{"n":1}')
    assert worker.registry.names() == ["tick"]


def test_worker_periodic_takes_its_cron_first_or_as_a_keyword(db: Database) -> None:
    worker = db.worker()

    @worker.periodic("@daily")
    async def first(ctx: Any) -> None: ...

    @worker.periodic(cron="@daily")
    async def keyword(ctx: Any) -> None: ...

    assert [s.timing for s in worker.schedules] == [Timing.parse(cron="@daily")] * 2


def test_worker_periodic_refuses_a_cron_given_first_and_as_a_keyword(db: Database) -> None:
    worker = db.worker()
    with pytest.raises(InvalidArgument, match="cron given twice"):
        worker.periodic("@daily", cron="@hourly")


def test_worker_schedule_takes_an_options_object_and_keywords_replacing_its_fields(
    db: Database,
) -> None:
    worker = db.worker(queues=["mail"])
    hourly = ScheduleOptions(every="1h", queue="sync")
    spec = worker.schedule("hourly-sync", "crm.sync", hourly, every="30m")
    same = worker.schedule("other-sync", "crm.sync", every="30m", queue="sync")
    assert dataclasses.replace(spec, name="other-sync") == same
    plain = worker.schedule("plain", "crm.sync", ScheduleOptions(every="1h"))
    assert plain.queue == "mail"


def test_schedule_spec_build_takes_an_options_object_or_keywords_alike() -> None:
    options = ScheduleOptions(every="10s", queue="mail", catch_up="5m")
    spec = ScheduleSpec.build(JsonCodec(), "tick", "job", options, paused=True)
    assert spec == ScheduleSpec.build(
        JsonCodec(), "tick", "job", every="10s", queue="mail", catch_up="5m", paused=True
    )


# --- the flat methods, kept for one release ------------------------------------------------


async def _warns(call: Awaitable[Any], old: str, new: str) -> Any:
    forget_warnings()
    with pytest.warns(CairnQDeprecationWarning, match=rf"{old}.*use {new}") as caught:
        result = await call
    assert [Path(w.filename).name for w in caught] == [Path(__file__).name]
    return result


async def test_add_schedule_still_adds_and_warns(db: Database) -> None:
    async with db.client() as cq:
        added = await _warns(
            cq.add_schedule("tick", "job", every="10s", paused=True),
            r"cq\.add_schedule",
            r"cq\.schedules\.add",
        )
        assert added == await cq.schedules.get("tick") and added.paused


async def test_get_schedule_still_reads_and_warns(db: Database) -> None:
    async with db.client() as cq:
        added = await cq.schedules.add("tick", "job", every="10s")
        found = await _warns(cq.get_schedule("tick"), r"cq\.get_schedule", r"cq\.schedules\.get")
        assert found == added


async def test_list_schedules_still_lists_and_warns(db: Database) -> None:
    async with db.client() as cq:
        added = await cq.schedules.add("tick", "job", every="10s")
        listed = await _warns(cq.list_schedules(), r"cq\.list_schedules", r"cq\.schedules\.list")
        assert listed == [added]


async def test_pause_schedule_still_pauses_and_warns(db: Database) -> None:
    async with db.client() as cq:
        await cq.schedules.add("tick", "job", every="10s")
        paused = await _warns(
            cq.pause_schedule("tick"), r"cq\.pause_schedule", r"cq\.schedules\.pause"
        )
        assert paused is not None and paused.paused


async def test_resume_schedule_still_resumes_and_warns(db: Database) -> None:
    async with db.client() as cq:
        await cq.schedules.add("tick", "job", every="10s", paused=True)
        resumed = await _warns(
            cq.resume_schedule("tick"), r"cq\.resume_schedule", r"cq\.schedules\.resume"
        )
        assert resumed is not None and not resumed.paused


async def test_remove_schedule_still_removes_and_warns(db: Database) -> None:
    async with db.client() as cq:
        await cq.schedules.add("tick", "job", every="10s")
        removed = await _warns(
            cq.remove_schedule("tick"), r"cq\.remove_schedule", r"cq\.schedules\.remove"
        )
        assert removed is True and await cq.schedules.list() == []


async def test_schedule_history_still_reads_the_slots_and_warns(db: Database) -> None:
    clock = FakeClock(START + 1)
    async with db.client(clock=clock) as cq:
        await cq.schedules.add("tick", "job", every="10s")
        clock.advance(10_000)
        await cq.schedules.run_due()
        history = await _warns(
            cq.schedule_history("tick", limit=5),
            r"cq\.schedule_history",
            r"cq\.schedules\.history",
        )
        assert history == await cq.schedules.history("tick", limit=5)
        assert [slot.outcome for slot in history] == ["enqueued"]


async def test_run_schedules_still_submits_due_slots_and_warns(db: Database) -> None:
    clock = FakeClock(START + 1)
    async with db.client(clock=clock) as cq:
        await cq.schedules.add("tick", "job", every="10s")
        clock.advance(20_000)
        submitted = await _warns(
            cq.run_schedules(), r"cq\.run_schedules", r"cq\.schedules\.run_due"
        )
        assert submitted == 2


FLAT: dict[str, Callable[[Any], Any]] = {
    "add_schedule": lambda cq: cq.add_schedule("other", "job", every="10s"),
    "get_schedule": lambda cq: cq.get_schedule("tick"),
    "list_schedules": lambda cq: cq.list_schedules(),
    "pause_schedule": lambda cq: cq.pause_schedule("tick"),
    "resume_schedule": lambda cq: cq.resume_schedule("tick"),
    "remove_schedule": lambda cq: cq.remove_schedule("tick"),
    "schedule_history": lambda cq: cq.schedule_history("tick"),
    "run_schedules": lambda cq: cq.run_schedules(),
}


@pytest.mark.parametrize("flat", FLAT)
def test_each_flat_schedule_method_of_the_blocking_client_still_works_and_warns(
    db: Database, flat: str
) -> None:
    with db.sync_client() as cq:
        cq.schedules.add("tick", "job", every="10s")
        forget_warnings()
        with pytest.warns(CairnQDeprecationWarning, match=rf"cq\.{flat}") as caught:
            FLAT[flat](cq)
        assert [Path(w.filename).name for w in caught] == [Path(__file__).name]


async def test_a_flat_schedule_method_warns_once_per_process(db: Database) -> None:
    async with db.client() as cq:
        await _warns(cq.list_schedules(), r"cq\.list_schedules", r"cq\.schedules\.list")
        with warnings.catch_warnings(record=True) as later:
            warnings.simplefilter("always")
            await cq.list_schedules()
        assert later == []


NAMESPACE = {
    "add_schedule": "add",
    "get_schedule": "get",
    "list_schedules": "list",
    "pause_schedule": "pause",
    "resume_schedule": "resume",
    "remove_schedule": "remove",
    "schedule_history": "history",
    "run_schedules": "run_due",
}


@pytest.mark.parametrize("client", [CairnQ, SyncCairnQ])
def test_the_flat_schedule_methods_are_the_listed_ones_each_with_a_namespace_method(
    client: type[Any],
) -> None:
    flat = {n for n in dir(client) if not n.startswith("_") and "schedul" in n} - {"schedules"}
    assert flat == set(FLAT) == set(NAMESPACE)
    assert all(callable(getattr(AsyncSchedules, method)) for method in NAMESPACE.values())
