"""When a worker's settlements decide dependents: the workflows' gate.

A worker's settlement decides parked dependents in its own transaction only for a
task some parked task waits on (its workflows component reads them once a second)
or one the worker's client made others wait for, as known when the settlement is
prepared; any other settlement sends no workflows statement, whatever is parked
elsewhere. A graph another process submits is seen at the next look, and a
dependency this worker settles before that is left to the sweep, which releases its
dependents within about a second more (``extensions/workflows/_component.py``).
"""

from __future__ import annotations

import asyncio
import contextlib
import sqlite3
import threading
import time
from collections.abc import AsyncIterator
from typing import Any, cast

import pytest

from cairnq import CairnQ, Worker
from cairnq import kernel as _kernel
from cairnq.extensions import Schedules
from cairnq.extensions.workflows import PARKED_RUN_AT_MS, _awaited, _component
from cairnq.extensions.workflows import _ops as _workflows
from cairnq.extensions.workflows._component import WAITED_ON_LIMIT, WorkflowSweeper
from cairnq.models import Lease
from cairnq.protocol.steps import Row
from cairnq.worker._run import Run

from ._db import Database, admin_connect, statement_work
from ._statements import sent_statements
from .test_statement_count import _names, _naming
from .test_without_extensions import migrate_only

# One look (1 s), one sweep (1 s) and a claim, with room for a slow machine.
RELEASE_BOUND_S = 5.0


def _decides(worker: Worker, task_id: str) -> bool:
    """Whether a settlement of ``task_id`` that ``worker`` prepares now runs a task-end
    hook (decides its dependents): the gate a settlement reads when it is prepared."""
    return bool(worker._runtime.points.ending([task_id]).task)


@contextlib.asynccontextmanager
async def _prepared(client: CairnQ) -> AsyncIterator[tuple[Worker, Run, Any]]:
    """A worker on ``client``, its run assembled and its workflows component prepared, no
    job started; the run is closed on the way out."""
    worker = Worker(client, extensions=[Schedules(evaluate=False)])
    worker._stopping = asyncio.Event()
    assert await worker._open_checked()
    run = worker._assemble(until_idle=True)
    try:
        [part] = [p for p in worker._components(run) if p.name == "workflows"]
        await part.prepare()
        yield worker, run, part
    finally:
        run.close()


async def test_a_worker_decides_dependents_only_once_it_saw_a_parked_task_or_made_one(
    db: Database,
) -> None:
    async with (
        db.client() as mine,
        db.client() as other,
        _prepared(mine) as (worker, _run, part),
    ):
        first = await other.submit("a")
        waiting = await other.submit("b", depends_on=[first])
        # Another client's graph is seen at the component's next look.
        assert not _decides(worker, first.id)
        await part.sweeper.look()
        assert _decides(worker, first.id)
        # Canceled, then unparked by a sweep: nothing is parked any more.
        await other.cancel(waiting.id)
        await other.backend.arun(_workflows.sweep(), write=True)
        await part.sweeper.look()
        assert not _decides(worker, first.id)
        # This worker's own client made a task wait: decided from then on, at once.
        await mine.submit("c", depends_on=[first])
        assert _decides(worker, first.id)


async def test_a_worker_without_the_workflow_tables_never_decides(db: Database) -> None:
    workflows = ("x0008", "x0010", "x0013", "x0016")
    migrate_only(db, lambda name: not name.startswith(workflows))
    async with db.client(migrate=False) as mine, _prepared(mine) as (worker, run, part):
        await mine.submit("a", queue="lone")
        await part.sweeper.look()
        names = await _settle(worker, run, await _claim(mine, "lone", worker))
        assert "op complete_many" in names
        assert _workflows_statements(names) == []


async def test_a_dependent_another_process_submitted_is_released_within_the_bound(
    db: Database,
) -> None:
    worker = db.worker(poll_interval_ms=20, extensions=[Schedules(evaluate=False)])
    ran: dict[str, float] = {}
    decided: list[bool] = []

    @worker.task
    async def first(ctx: Any) -> None:
        decided.append(_decides(worker, ctx.task.id))
        ran["first"] = time.monotonic()

    @worker.task
    async def then(ctx: Any) -> None:
        ran["then"] = time.monotonic()

    async with db.client() as other, worker.background():
        await other.submit_graph({"a": {"task": "first"}, "b": {"task": "then", "after": ["a"]}})
        deadline = time.monotonic() + 30
        while "then" not in ran and time.monotonic() < deadline:
            await asyncio.sleep(0.02)
    assert "then" in ran, "the dependent was never released"
    # Whether a's settlement decided b (a look came first) or the sweep did, b ran
    # within the bound of a's handler returning.
    assert ran["then"] - ran["first"] < RELEASE_BOUND_S, (ran, decided)


# --- which settlements decide: the tasks parked tasks wait on ----------------------------


async def _claim(cq: Any, queue: str, worker: Worker) -> Row:
    """Claim the one task of ``queue`` for ``worker``."""
    draws = [_kernel.Draw(None, 1)]
    [row] = await cq.backend.arun(
        _kernel.claim([queue], worker.worker_id, 60_000, draws, 0), write=True
    )
    return cast(Row, row)


async def _settle(worker: Worker, run: Run, row: Row) -> list[str]:
    """Settle the claimed ``row`` as the worker's settler does (a group of one); the
    operations, statements and transaction commands its settlement sent, by name."""
    backend = worker.client.backend
    arun = backend.arun
    taps: list[Any] = []

    async def naming_arun(op: Any, *, write: bool) -> Any:
        return await arun(_naming(op, taps[0]), write=write)

    backend.arun = naming_arun  # type: ignore[method-assign]
    try:
        with sent_statements(backend) as heard:
            taps.append(heard)
            await run.settler.complete(Lease.of(row), None, row["updated_at_ms"])
            return _names(heard)
    finally:
        del backend.arun


def _workflows_statements(names: list[str]) -> list[str]:
    return [name for name in names if name.startswith("workflows_")]


async def _parked(cq: Any, task_id: str) -> bool:
    task = await cq.get(task_id)
    assert task is not None
    return task.status == "queued" and task.run_at_ms == PARKED_RUN_AT_MS


async def test_a_settlement_of_a_task_no_parked_task_waits_on_sends_no_workflows_statement(
    db: Database,
) -> None:
    async with (
        db.client() as mine,
        db.client() as other,
        _prepared(mine) as (worker, run, part),
    ):
        # A task parked elsewhere, seen by the look.
        waited = await other.submit("a", queue="elsewhere")
        await other.submit("b", queue="elsewhere", depends_on=[waited])
        await other.submit("c", queue="lone")
        await part.sweeper.look()
        names = await _settle(worker, run, await _claim(other, "lone", worker))
        assert "op complete_many" in names
        assert _workflows_statements(names) == []


async def test_a_settlement_of_a_task_a_parked_task_waits_on_releases_it_in_its_transaction(
    db: Database,
) -> None:
    async with (
        db.client() as mine,
        db.client() as other,
        _prepared(mine) as (worker, run, part),
    ):
        waited = await other.submit("a", queue="first")
        then = await other.submit("b", depends_on=[waited])
        await part.sweeper.look()
        names = await _settle(worker, run, await _claim(other, "first", worker))
        assert "workflows_lock_parked" in names
        # Released by the settlement itself: no sweep ran.
        assert not await _parked(other, then.id)


async def test_a_graph_the_worker_s_own_client_submits_is_decided_without_a_look(
    db: Database,
) -> None:
    async with (
        db.client() as mine,
        _prepared(mine) as (worker, run, _),
    ):  # its look found nothing parked
        tasks = await mine.submit_graph(
            {"a": {"task": "a", "queue": "first"}, "b": {"task": "b", "after": ["a"]}}
        )
        names = await _settle(worker, run, await _claim(mine, "first", worker))
        assert "workflows_lock_parked" in names
        assert not await _parked(mine, tasks["b"].id)


async def test_without_the_success_keeping_trigger_every_settlement_decides(
    db: Database,
) -> None:
    migrate_only(db, lambda name: name != "x0016_workflows_keep_success.sql")
    async with db.client(migrate=False) as mine, _prepared(mine) as (worker, run, _):
        # Nothing parked, nothing submitted: a purge could still forget a success
        # no settlement recorded, so every settlement decides.
        await mine.submit("c", queue="lone")
        names = await _settle(worker, run, await _claim(mine, "lone", worker))
        assert "workflows_lock_parked" in names


async def test_while_parked_tasks_wait_on_more_than_the_look_reads_every_settlement_decides(
    db: Database, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(_component, "WAITED_ON_LIMIT", 1)
    async with (
        db.client() as mine,
        db.client() as other,
        _prepared(mine) as (worker, run, part),
    ):
        waited = [await other.submit("a", queue="elsewhere") for _ in range(2)]
        await other.submit("b", queue="elsewhere", depends_on=waited)
        await other.submit("c", queue="lone")
        await part.sweeper.look()
        names = await _settle(worker, run, await _claim(other, "lone", worker))
        assert "workflows_lock_parked" in names


async def test_while_the_client_noted_more_than_it_keeps_every_settlement_decides(
    db: Database, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(_awaited, "LIMIT", 2)
    async with (
        db.client() as mine,
        _prepared(mine) as (worker, run, _),
    ):  # its look found nothing parked
        waited = [await mine.submit("a", queue=f"q{n}") for n in range(3)]
        # Three noted, two kept: the first is forgotten, not its dependent.
        then = await mine.submit("b", depends_on=waited)
        names = await _settle(worker, run, await _claim(mine, "q0", worker))
        assert "workflows_lock_parked" in names
        assert await _parked(mine, then.id)  # still waiting on the other two


async def test_a_settlement_prepared_while_the_client_s_submission_parks_its_dependent_decides(
    db: Database, monkeypatch: pytest.MonkeyPatch
) -> None:
    real = _workflows.submit_nodes
    during: list[bool] = []
    async with (
        db.client() as mine,
        _prepared(mine) as (worker, _run, _),
    ):  # its look found nothing parked
        first = await mine.submit("a")

        def watched(nodes: list[_workflows.Node]) -> Any:
            # Inside the submission's transaction, before it writes anything.
            during.append(_decides(worker, first.id))
            return (yield from real(nodes))

        monkeypatch.setattr(_workflows, "submit_nodes", watched)
        await mine.submit("b", depends_on=[first])
        assert during == [True]


async def test_a_graph_node_whose_key_returned_a_task_is_decided_when_that_task_settles(
    db: Database,
) -> None:
    async with (
        db.client() as mine,
        db.client() as other,
        _prepared(mine) as (worker, run, _),
    ):  # its look found nothing parked
        existing = await other.submit("a", key="k", queue="first")
        tasks = await mine.submit_graph(
            {
                "a": {"task": "a", "key": "k", "queue": "first"},
                "b": {"task": "b", "after": ["a"]},
            }
        )
        assert tasks["a"].id == existing.id
        names = await _settle(worker, run, await _claim(mine, "first", worker))
        assert "workflows_lock_parked" in names
        assert not await _parked(mine, tasks["b"].id)


@pytest.fixture
def no_look_after_prepare(monkeypatch: pytest.MonkeyPatch) -> None:
    """A worker's workflows look runs once (its prepare) and never again."""
    real = WorkflowSweeper.look

    async def once(self: WorkflowSweeper) -> None:
        if not getattr(self, "_looked", False):
            self._looked = True  # type: ignore[attr-defined]
            await real(self)

    monkeypatch.setattr(WorkflowSweeper, "look", once)


async def test_a_parent_s_gather_is_decided_by_its_children_s_settlements_without_look_or_sweep(
    db: Database, no_look_after_prepare: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    async def no_sweep(self: WorkflowSweeper) -> int:
        return 0

    monkeypatch.setattr(WorkflowSweeper, "tick", no_sweep)
    worker = db.worker(poll_interval_ms=20, concurrency=1, extensions=[Schedules(evaluate=False)])

    @worker.task
    async def parent(ctx: Any) -> int:
        children = [await ctx.spawn("child", {"n": n}) for n in range(3)]
        return sum(await ctx.gather(children))

    @worker.task
    async def child(ctx: Any, payload: Any) -> int:
        return int(payload["n"])

    async with db.client() as cq:
        task = await cq.submit("parent")
        # Idle once nothing is due: a parent left parked would stay so.
        await asyncio.wait_for(worker.run(until_idle=True), 60)
        done = await cq.get(task.id)
    assert done is not None and done.status == "succeeded" and done.result == 3


async def _parked_with_its_child_ended_undecided(cq: CairnQ, worker: Worker) -> str:
    """A parent (queue ``p``) that gathered its child (queue ``c``), parked, the child
    ended by a settlement prepared before the gather (its gate read then, as one
    already built is when ``ctx.gather`` notes the child): nothing decided the parent.
    Returns the parent's id."""
    parent = await cq.submit("p", queue="p")
    child = await cq.submit("c", queue="c")
    held, ended = await _claim(cq, "p", worker), await _claim(cq, "c", worker)
    settlement = _kernel.complete(
        Lease.of(ended),
        worker.worker_id,
        None,
        points=worker._runtime.points,
        started=ended["updated_at_ms"],
    )
    _awaited.note(cq, [child.id])
    gather = _workflows.gather(Lease.of(held), worker.worker_id, [child.id])
    assert (await cq.backend.arun(gather, write=True)).parked is not None
    await cq.backend.arun(settlement, write=True)
    assert await _parked(cq, parent.id)
    return parent.id


async def test_a_parent_gathering_a_child_whose_settlement_was_prepared_is_released_by_the_sweep(
    db: Database,
) -> None:
    async with (
        db.client() as mine,
        _prepared(mine) as (worker, _run, _),
    ):  # its look found nothing parked
        parent_id = await _parked_with_its_child_ended_undecided(mine, worker)
        await mine.backend.arun(_workflows.sweep(), write=True)
        assert not await _parked(mine, parent_id)


async def test_a_run_until_idle_releases_a_parent_its_children_ended_undecided_before_it_stops(
    db: Database,
) -> None:
    async with db.client() as mine:
        async with _prepared(mine) as (other, _run, _):
            parent_id = await _parked_with_its_child_ended_undecided(mine, other)
        worker = db.worker(
            queues=["p"], poll_interval_ms=20, extensions=[Schedules(evaluate=False)]
        )
        runs: list[int] = []

        @worker.task
        async def p(ctx: Any) -> None:
            runs.append(ctx.attempt)

        await asyncio.wait_for(worker.run(until_idle=True), 30)
        done = await mine.get(parent_id)
        assert runs == [1] and done is not None and done.status == "succeeded", (runs, done)


async def test_a_graph_submitted_elsewhere_after_the_look_is_released_by_the_sweep_within_the_bound(
    db: Database, no_look_after_prepare: None
) -> None:
    worker = db.worker(poll_interval_ms=20, extensions=[Schedules(evaluate=False)])
    ran: dict[str, float] = {}

    @worker.task
    async def first(ctx: Any) -> None:
        ran["first"] = time.monotonic()

    @worker.task
    async def then(ctx: Any) -> None:
        ran["then"] = time.monotonic()

    async with db.client() as other:
        # Parked elsewhere when the worker looks; the graph comes after its only look.
        waited = await other.submit("a", queue="elsewhere")
        await other.submit("b", queue="elsewhere", depends_on=[waited])
        async with worker.background():
            await other.submit_graph(
                {"a": {"task": "first"}, "b": {"task": "then", "after": ["a"]}}
            )
            deadline = time.monotonic() + 30
            while "then" not in ran and time.monotonic() < deadline:
                await asyncio.sleep(0.02)
    assert "then" in ran, "the dependent was never released"
    assert ran["then"] - ran["first"] < RELEASE_BOUND_S, ran


async def test_the_look_reads_the_tasks_parked_tasks_wait_on_up_to_its_limit(
    db: Database,
) -> None:
    async with db.client() as cq:
        first, second = await cq.submit("a"), await cq.submit("a")
        await cq.submit("b", depends_on=[first, second])
        await cq.submit("b", depends_on=[first])
        ended = await cq.submit("a")
        await cq.submit("b", depends_on=[ended])
        await cq.cancel(ended.id)  # its dependent is canceled with it: no longer parked
        read = _workflows.waited_on_by_parked
        assert await cq.backend.arun(read(3), write=False) == {first.id, second.id}
        # Three edges: past a limit of two, any task may have a parked dependent.
        assert await cq.backend.arun(read(2), write=False) is None


async def test_the_look_counts_more_parked_tasks_than_its_limit_as_too_many(
    db: Database,
) -> None:
    async with db.client() as cq:
        waited = [await cq.submit("a") for _ in range(3)]
        for task in waited:
            await cq.submit("b", depends_on=[task])
        read = _workflows.waited_on_by_parked
        assert await cq.backend.arun(read(3), write=False) == {t.id for t in waited}
        # Three parked tasks of one edge each: past a limit of two.
        assert await cq.backend.arun(read(2), write=False) is None


# Edges of tasks no longer parked: every edge stays until its task is purged.
HISTORY_EDGES = 50_000


def _add_history(db: Database, edges: int) -> None:
    """Write ``edges`` edges of tasks that are not parked, as ended tasks leave them, their
    ids sorting before any task cairnq makes now (they are older)."""
    if db.kind == "sqlite":
        with contextlib.closing(sqlite3.connect(str(db.path))) as conn, conn:
            conn.executemany(
                "insert into cairnq_dependencies (task_id, depends_on_id, policy)"
                " values (?, ?, 'cancel')",
                ((f"task_0{n:09d}", f"task_0{n - 1:09d}") for n in range(1, edges + 1)),
            )
        return
    with admin_connect(db.url) as conn:
        conn.execute(f'set search_path to "{db.schema}"')
        conn.execute(
            "insert into cairnq_dependencies (task_id, depends_on_id, policy)"
            " select 'task_0' || lpad(n::text, 9, '0'), 'task_0' || lpad((n - 1)::text, 9, '0'),"
            " 'cancel' from generate_series(1, %(edges)s) as n",
            {"edges": edges},
        )


async def test_the_look_reads_no_edge_of_a_task_no_longer_parked(db: Database) -> None:
    async with db.client() as cq:
        first = await cq.submit("a")
        await cq.submit("b", depends_on=[first])
        await cq.submit("b", depends_on=[first])
    look = {"limit": WAITED_ON_LIMIT + 1}
    small, rows = statement_work(db, "workflows_waited_on", look)
    _add_history(db, HISTORY_EDGES)
    large, same = statement_work(db, "workflows_waited_on", look)
    assert rows == same == 1
    # About the same work (an index a level deeper at most), where reading the history
    # is tens of thousands of steps or hundreds of pages.
    assert large < 2 * small + 10, (small, large)


def test_a_client_that_noted_more_than_the_limit_lately_makes_every_settlement_decide(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(_awaited, "LIMIT", 2)
    noted = _awaited.Awaited()
    noted.note(["t1", "t2"])
    assert not noted.everything()
    noted.note(["t3"])
    assert noted.everything() and "t3" in noted


def test_a_client_forgets_what_it_noted_once_the_horizon_passed(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    now = [100.0]
    monkeypatch.setattr(_awaited.time, "monotonic", lambda: now[0])
    noted = _awaited.Awaited()
    noted.note(["old"])
    now[0] += _awaited.HORIZON_S / 2
    noted.note(["new"])
    now[0] += _awaited.HORIZON_S / 2 + 0.1
    noted.note(["newest"])
    assert "old" not in noted and "new" in noted and "newest" in noted


def test_two_threads_noting_first_on_a_client_keep_both_notes(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    made: list[_awaited.Awaited] = []
    entered, moved, go = threading.Event(), threading.Event(), threading.Event()

    class Slow(_awaited.Awaited):
        def __init__(self) -> None:
            super().__init__()
            made.append(self)
            if len(made) == 1:
                entered.set()
                go.wait(10)
            else:
                moved.set()

    class Watched:
        """The module's lock, telling when a thread finds it held and waits."""

        def __init__(self) -> None:
            self._lock = threading.Lock()

        def __enter__(self) -> None:
            if not self._lock.acquire(blocking=False):
                moved.set()
                self._lock.acquire()

        def __exit__(self, *exc: object) -> None:
            self._lock.release()

    class Client:
        _awaited: _awaited.Awaited | None = None

    monkeypatch.setattr(_awaited, "Awaited", Slow)
    monkeypatch.setattr(_awaited, "_MAKING", Watched())
    client = Client()
    first = threading.Thread(target=_awaited.note, args=(client, ["a"]))
    first.start()
    assert entered.wait(10)
    other = threading.Thread(target=_awaited.note, args=(client, ["b"]))
    other.start()
    # Unguarded, the second thread makes a set of its own now, while the first is being
    # made; guarded, it waits for the first. Either way it moves at once.
    assert moved.wait(10)
    go.set()
    first.join(10)
    other.join(10)
    assert not first.is_alive() and not other.is_alive()
    assert client._awaited is not None
    assert "a" in client._awaited and "b" in client._awaited
    assert len(made) == 1
