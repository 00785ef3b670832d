"""The built-in extensions' client namespaces (``cq.schedules``, ``cq.limits``, ...) on both
clients and both backends, and a client that names no feature itself. The deprecated flat
methods: ``tests/test_deprecated_surface.py``."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

import cairnq
from cairnq import CairnQ, Limit, SyncCairnQ
from cairnq.testing import FakeClock

from ._db import Database
from .test_kernel_names import mentions

START = 1_800_000_000_000


async def _eventually(probe: Any, timeout_s: float = 10.0) -> Any:
    deadline = asyncio.get_running_loop().time() + timeout_s
    while True:
        value = await probe()
        if value:
            return value
        if asyncio.get_running_loop().time() > deadline:
            raise AssertionError("timed out waiting")
        await asyncio.sleep(0.02)


async def test_the_schedules_namespace_adds_reads_pauses_resumes_and_removes(db: Database) -> None:
    async with db.client() as cq:
        added = await cq.schedules.add("nightly", "report.build", every="1h")
        assert added.name == "nightly"
        assert await cq.schedules.get("nightly") == added
        assert [s.name for s in await cq.schedules.list()] == ["nightly"]
        paused = await cq.schedules.pause("nightly")
        assert paused is not None and paused.paused
        resumed = await cq.schedules.resume("nightly")
        assert resumed is not None and not resumed.paused
        assert await cq.schedules.history("nightly") == []
        assert await cq.schedules.run_due() == 0
        assert await cq.schedules.remove("nightly") is True
        assert await cq.schedules.remove("nightly") is False
        assert await cq.schedules.get("nightly") is None


async def test_the_limits_namespace_sets_lists_reports_usage_and_removes(db: Database) -> None:
    async with db.client() as cq:
        stored = await cq.limits.set(Limit.concurrency(2, queue="emails", id="emails-2"))
        assert stored.id == "emails-2"
        assert [limit.id for limit in await cq.limits.list()] == ["emails-2"]
        assert [u.limit.id for u in await cq.limits.usage()] == ["emails-2"]
        assert await cq.limits.remove("emails-2") is True
        assert await cq.limits.remove("emails-2") is False


async def test_the_pauses_namespace_pauses_and_resumes_queues_and_task_names(db: Database) -> None:
    async with db.client() as cq:
        queue = await cq.pauses.pause_queue("emails", by="ops")
        name = await cq.pauses.pause_task("invoice.charge")
        assert (queue.target, queue.paused_by, name.target) == ("emails", "ops", "invoice.charge")
        assert [p.target for p in await cq.pauses.list()] == ["emails", "invoice.charge"]
        assert await cq.pauses.resume_queue("emails") == queue
        assert await cq.pauses.resume_queue("emails") is None
        assert await cq.pauses.resume_task("invoice.charge") == name
        assert await cq.pauses.resume_task("invoice.charge") is None


async def test_the_workflows_namespace_submits_a_graph_and_reads_it_back(db: Database) -> None:
    async with db.client() as cq:
        tasks = await cq.workflows.submit(
            {"fetch": {"task": "etl.fetch"}, "report": {"task": "etl.report", "after": ["fetch"]}}
        )
        report = tasks["report"]
        [dependency] = await cq.workflows.dependencies(report.id)
        assert dependency.task is not None and dependency.task.id == tasks["fetch"].id
        workflow = await cq.workflows.get(report.id)
        assert workflow is not None
        assert set(workflow.tasks) == {tasks["fetch"].id, report.id}
        assert await cq.workflows.get("task_unknown") is None
        assert cq._awaited is not None and tasks["fetch"].id in cq._awaited


async def test_submit_graph_is_the_namespace_submit(db: Database) -> None:
    async with db.client() as cq:
        tasks = await cq.submit_graph({"a": {"task": "a"}, "b": {"task": "b", "after": ["a"]}})
        workflow = await cq.workflows.get(tasks["b"].id)
        assert workflow is not None and len(workflow.tasks) == 2
        dependent = await cq.submit("c", depends_on=[tasks["b"]])
        assert [d.id for d in await cq.workflows.dependencies(dependent.id)] == [tasks["b"].id]


async def test_the_attempts_steps_snooze_and_presence_namespaces_read_a_task_s_runs(
    db: Database,
) -> None:
    clock = FakeClock(START)
    worker = db.worker(clock=clock, poll_interval_ms=20, queues=["work"])

    @worker.task
    async def fetch(ctx: Any) -> None:
        await ctx.step("load", lambda: 41)
        await ctx.snooze(30)

    async with db.client(clock=clock) as cq, worker.background():
        task = await cq.submit("fetch", queue="work")
        snoozes = await _eventually(lambda: cq.snooze.get(task.id))
        await cq.submit("nobody.serves", queue="work")
        assert snoozes.count == 1
        [attempt] = await cq.attempts.list(task.id)
        assert attempt.outcome == "snoozed"
        [step] = await cq.steps.list(task.id)
        assert (step.name, step.result) == ("load", 41)
        workers = await cq.presence.workers()
        assert worker.worker_id in [w.worker_id for w in workers]
        unserved = await cq.presence.unserved(queue="work")
        assert [(u.queue, u.name) for u in unserved] == [("work", "nobody.serves")]


def test_the_blocking_namespaces_do_what_the_async_ones_do(db: Database) -> None:
    with db.sync_client() as cq:
        assert [cq.schedules.add("nightly", "report.build", every="1h")] == cq.schedules.list()
        assert cq.limits.set(Limit.concurrency(1, queue="q", id="q-1")) == cq.limits.list()[0]
        assert [u.limit.id for u in cq.limits.usage()] == ["q-1"]
        assert cq.pauses.pause_queue("q") == cq.pauses.list()[0]
        tasks = cq.workflows.submit({"a": {"task": "a"}, "b": {"task": "b", "after": ["a"]}})
        [dependency] = cq.workflows.dependencies(tasks["b"].id)
        assert dependency.task is not None and dependency.task.id == tasks["a"].id
        workflow = cq.workflows.get(tasks["b"].id)
        assert workflow is not None and len(workflow.tasks) == 2
        assert cq.attempts.list(tasks["a"].id) == []
        assert cq.steps.list(tasks["a"].id) == []
        assert cq.snooze.get(tasks["a"].id) is None
        assert [(u.queue, u.name) for u in cq.presence.unserved()] == [("default", "a")]
        assert cq.presence.workers() == []
        assert cq.schedules.remove("nightly") and cq.limits.remove("q-1")
        assert cq.pauses.resume_queue("q") is not None


# Each built-in extension's namespace on the client, by extension name.
NAMESPACES = {
    "batches": "batches",
    "history": "attempts",
    "limits": "limits",
    "logs": "attempts",
    "pauses": "pauses",
    "policies": "policies",
    "presence": "presence",
    "schedules": "schedules",
    "search": "search",
    "snooze": "snooze",
    "steps": "steps",
    "uniqueness": "uniqueness",
    "waits": "events",
    "workflows": "workflows",
}


@pytest.mark.parametrize("client", [CairnQ, SyncCairnQ])
def test_each_client_has_a_namespace_per_built_in_extension_with_a_client_part(
    client: type[Any],
) -> None:
    names = {n for n in dir(client) if isinstance(getattr(client, n), property)}
    assert set(NAMESPACES.values()) <= names
    assert {ext.name for ext in cairnq.extensions.builtins()} == set(NAMESPACES)


CLIENT = Path(cairnq.__file__).parent / "client"


@pytest.mark.parametrize("module", ["__init__.py", "_async.py", "_core.py", "_sync.py"])
def test_the_client_modules_name_no_feature(module: str) -> None:
    assert mentions((CLIENT / module).read_text()) == {}


def test_the_scan_of_the_client_would_see_a_flat_feature_method() -> None:
    assert mentions("async def add_schedule(self): ...")["schedules"] == 1
