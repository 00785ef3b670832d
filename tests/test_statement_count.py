"""Pay for what you use: a feature installed but not used adds nothing to a worker's
claim and settlement, apart from the hidden costs pinned in ``KNOWN_EXTRA`` (none
left; the search extension's error index is written by a trigger in the failing
statement, so it is heard as nothing more); recording attempts, which the
attempt history does wherever it is installed unless a worker turns it off, costs
what ``HISTORY_COST`` pins. An extension outside cairnq (the guide's audit log,
``tests/audit_ext``) keeps the same rule: installed (its migration applied, given
to the client and the worker) with its hook's ``in_use`` gate false, it adds
nothing; in use, it costs what ``AUDIT_COST`` pins. A client's cancel, outside a
worker run, costs what ``CANCEL_COST`` pins.

Two databases: the kernel alone (the protocol's migrations and the kernel's own
extension migrations, named leases and lease tokens, opened with ``migrate=False``)
and every migration applied with no schedule, limit, pause, workflow or step in use.
On each, the worker's own claimer and settler are prepared as a run prepares them
and driven directly: a running worker's timers (presence, pauses, the sweepers,
the limit book's reload) would make the count depend on timing.

A path's sequence names, in order, each operation handed to the backend
(``op <name>``: a round trip of its own), each canonical statement it runs (the
``Call``'s name) and each transaction command the database hears
(``tests/_statements.py``'s tap).
"""

from __future__ import annotations

import asyncio
from collections import Counter
from collections.abc import Generator, Iterator, Sequence
from importlib import resources
from typing import Any

import pytest

from cairnq import _readiness
from cairnq import kernel as _kernel
from cairnq.extensions import Extension, History, Hooks, Schedules, WorkerView
from cairnq.models import Lease, Task
from cairnq.protocol.statements import drop_folder
from cairnq.protocol.steps import Call, Op, Pipelined, SingleStatement
from cairnq.worker import Worker
from cairnq.worker._context import TaskContext

from ._db import Database
from ._statements import sent_statements
from .audit_ext import Audit, record
from .test_without_extensions import migrate_only

KERNEL_MIGRATIONS = {"x0001_locks.sql", "x0003_leases.sql", "x0011_leases_forget.sql"}
TASKS = 3
# The idle worker's claim (a probe, then a claim that recovers expired leases), the
# claim of a worker woken by a queued task while a recovery ran lately, one
# settlement group of the first claim's tasks, and a handler's failure (retried).
PATHS = ("claim", "claim on news", "settle", "fail")
CONTROL = ("begin", "commit", "rollback", "savepoint", "release", "pragma")
# Operations run on a timer, left out with their statements (none reaches these
# paths: the limit book reloads from its component's job, not from a claim).
TIMERS: set[str] = set()

# (backend, path, statement) -> how many more times it runs with every feature
# installed but unused, in a claim of TASKS tasks, one settlement group of them or
# one failure.
# It may only shrink: the change that removes a hidden cost lowers its entry.
KNOWN_EXTRA: dict[tuple[str, str, str], int] = {}

# What recording attempts costs (the attempt history in use, ``record_attempts=True``
# on a database with its table): the recovering claim reads the expired attempts to
# record them, and each settlement records its attempts in its transaction. On
# PostgreSQL the settling statement records them itself (the history's variant runs
# in place of the kernel's statement: -1 for the kernel's, +1 for the variant, still
# one statement with no transaction of its own); on SQLite a statement of its own,
# with a savepoint around the op.
HISTORY_COST: dict[tuple[str, str, str], int] = {
    ("sqlite", "claim", "history_expired"): 1,
    ("postgres", "claim", "history_expired"): 1,
    ("sqlite", "settle", "history_record"): 1,
    ("sqlite", "settle", "savepoint op"): 1,
    ("sqlite", "settle", "release op"): 1,
    ("postgres", "settle", "complete_many"): -1,
    ("postgres", "settle", "history_complete_many"): 1,
    ("sqlite", "fail", "history_record"): 1,
    ("sqlite", "fail", "savepoint op"): 1,
    ("sqlite", "fail", "release op"): 1,
    ("postgres", "fail", "fail"): -1,
    ("postgres", "fail", "history_fail"): 1,
}

# What an extension outside cairnq costs in use: the audit log (``tests/audit_ext``)
# writes its rows in each settlement's transaction (on PostgreSQL one the
# one-statement settlement does not open, on SQLite a savepoint around the op); its
# hook has nothing to write in a claim that recovers nothing.
AUDIT_COST: dict[tuple[str, str, str], int] = {
    ("sqlite", "settle", "audit_record"): 1,
    ("sqlite", "settle", "savepoint op"): 1,
    ("sqlite", "settle", "release op"): 1,
    ("postgres", "settle", "audit_record"): 1,
    ("postgres", "settle", "begin"): 1,
    ("postgres", "settle", "commit"): 1,
    ("sqlite", "fail", "audit_record"): 1,
    ("sqlite", "fail", "savepoint op"): 1,
    ("sqlite", "fail", "release op"): 1,
    ("postgres", "fail", "audit_record"): 1,
    ("postgres", "fail", "begin"): 1,
    ("postgres", "fail", "commit"): 1,
}

Sequences = dict[str, list[str]]


def hidden_costs(
    kind: str,
    kernel: Sequences,
    installed: Sequences,
    extras: dict[tuple[str, str, str], int] = KNOWN_EXTRA,
    paths: Sequence[str] = PATHS,
) -> list[str]:
    """Each way ``installed`` differs from ``kernel`` beyond ``extras`` (``KNOWN_EXTRA``),
    and each entry of it that is no longer (or less) seen; ``[]`` when they match it exactly.

    A negative entry is a statement ``installed`` runs in place of one of ``kernel``'s
    (an extension's variant of it): it must run exactly that many fewer times."""
    problems: list[str] = []
    for path in paths:
        extra = Counter(installed[path])
        extra.subtract(kernel[path])
        known = {name: n for (k, p, name), n in extras.items() if (k, p) == (kind, path)}
        for name in sorted(set(extra) | set(known)):
            count, allowed = extra[name], known.get(name, 0)
            key = (kind, path, name)
            if allowed < 0:
                if count != allowed:
                    problems.append(
                        f"{path}: {name} runs {count:+d} time(s), {key!r} says {allowed}"
                    )
            elif count > allowed:
                problems.append(
                    f"{path}: {name} runs {count} more time(s) with every feature installed but "
                    f"unused, KNOWN_EXTRA allows {allowed}: a new hidden cost"
                )
            elif count < 0:
                problems.append(f"{path}: {name} runs {-count} fewer time(s) with every feature")
            elif count == 0 < allowed:
                problems.append(f"{path}: {name} no longer runs more: remove it, {key!r}")
            elif count < allowed:
                problems.append(f"{path}: {name} runs {count} more: lower {key!r} to {count}")
    return problems


def _names(heard: list[str]) -> list[str]:
    """Heard statements as names: every one must be a transaction command or a named Call.

    SQLite hears a trigger's statements (the error index's, on a failure) as the text
    of the statement that fired it again: each is one statement, not a Call's. A
    PostgreSQL pool's new connection sets its ``search_path`` (heard from any connection
    of the process, at whatever moment the pool opens one): left out.
    A timer's operation is left out with all it ran."""
    names: list[str] = []
    unnamed = 0
    timer = False
    last_unnamed: str | None = None
    for text in heard:
        if text.startswith("-- arun "):
            timer = text.removeprefix("-- arun ") in TIMERS
        if text == last_unnamed:
            continue  # a trigger's statement, heard as the one that fired it
        if text.startswith('set search_path to "'):
            continue  # a pool's new connection setting itself up, whenever the pool opens one
        if text.startswith("-- call "):
            name = text.removeprefix("-- call ")
            unnamed -= 1
            last_unnamed = None
        elif text.startswith("-- "):
            name = text.removeprefix("-- ").replace("arun ", "op ", 1)
        elif text.split(None, 1)[0].lower() in CONTROL:
            name = " ".join(text.lower().split())
        else:
            unnamed += 1
            last_unnamed = text
            continue
        if not timer:
            names.append(name)
    assert unnamed == 0, f"statements heard that no Call named, or the reverse: {heard}"
    return names


def _naming(op: Op[Any], heard: Any) -> Op[Any]:
    """``op``, marked as it was (one statement, pipelined), hearing each Call's name first."""

    def run() -> Generator[Any, Any, Any]:
        reply = None
        while True:
            try:
                step = op.send(reply)
            except StopIteration as stop:
                return stop.value
            if isinstance(step, Call):
                heard.hear(f"-- call {step.statement}")
            reply = yield step

    if isinstance(op, SingleStatement | Pipelined):
        return type(op)(run())
    return run()


async def _measure(
    db: Database,
    *,
    record_attempts: bool = False,
    extensions: Sequence[Extension] = (),
    over_store: bool = False,
) -> Sequences:
    """The worker's sequence on each path, on ``db`` as it is migrated, with
    ``extensions`` given to its client and to it; ``over_store``: the worker runs over
    the client's store (``Worker(cq.store)``), nothing replaced on it."""
    async with db.client(migrate=False, extensions=extensions) as cq:
        for _ in range(2 * TASKS):
            await cq.submit("job")
        worker = Worker(
            cq.store if over_store else cq,
            concurrency=2 * TASKS,
            extensions=[Schedules(evaluate=False), History(record=record_attempts), *extensions],
        )
        worker.task("job")(lambda ctx: None)
        worker._stopping = asyncio.Event()
        assert await worker._open_checked()
        run = worker._assemble(until_idle=True)
        try:
            prepared = set()
            for part in worker._components(run):
                if part.name in {"limits", "pauses", "workflows", "ledger", "policies"}:
                    await part.prepare()
                    prepared.add(part.name)
            assert prepared == {"limits", "pauses", "workflows", "ledger", "policies"}
            backend = cq.backend
            arun = backend.arun
            taps: list[Any] = []

            async def naming_arun(op: Op[Any], *, write: bool) -> Any:
                return await arun(_naming(op, taps[0]), write=write)

            backend.arun = naming_arun  # type: ignore[method-assign]
            try:
                with sent_statements(backend) as heard:
                    taps.append(heard)
                    claimer = run.claimer
                    rows = await claimer._claim(claimer._plan(TASKS, TASKS), probe=True)
                    claim = _names(heard)
                    heard.clear()
                    news = await claimer._claim(claimer._plan(TASKS, TASKS), probe=False)
                    on_news = _names(heard)
                    heard.clear()
                    settled = [
                        run.settler.complete(Lease.of(row), None, row["updated_at_ms"])
                        for row in rows
                    ]
                    await asyncio.gather(*settled)
                    settle = _names(heard)
                    heard.clear()
                    row = news[0]
                    ctx = TaskContext(worker._runtime, Task.from_row(row), Lease.of(row), 0)
                    await ctx.fail("boom")
                    fail = _names(heard)
            finally:
                del backend.arun
        finally:
            run.close()
    assert len(rows) == len(news) == TASKS
    return {"claim": claim, "claim on news": on_news, "settle": settle, "fail": fail}


async def _both(db: Database) -> tuple[Sequences, Sequences]:
    """The sequences with the kernel alone, and with every feature installed but unused
    (the attempt history's recording off, decision D2)."""
    installed = await _measure(db)
    migrate_only(db, lambda name: not name.startswith("x") or name in KERNEL_MIGRATIONS)
    return await _measure(db), installed


async def test_installed_but_unused_features_add_only_the_known_hidden_costs(
    db: Database,
) -> None:
    kernel, installed = await _both(db)
    assert "complete_many" in kernel["settle"] and "claimable_probe" in kernel["claim"]
    assert hidden_costs(db.kind, kernel, installed) == []


async def test_a_worker_over_a_store_with_nothing_replaced_claims_and_settles_as_over_its_client(
    db: Database,
) -> None:
    over_client = await _measure(db)
    assert await _measure(db, over_store=True) == over_client


async def test_a_statement_an_unused_feature_adds_is_reported(db: Database) -> None:
    kernel, installed = await _both(db)
    installed["settle"].append("audit_insert")
    problems = hidden_costs(db.kind, kernel, installed)
    assert len(problems) == 1 and "settle: audit_insert" in problems[0], problems
    assert "new hidden cost" in problems[0]


async def test_recording_attempts_costs_one_read_per_recovering_claim_and_one_write_per_settlement(
    db: Database,
) -> None:
    recording = await _measure(db, record_attempts=True)
    kernel, installed = await _both(db)
    assert hidden_costs(db.kind, installed, recording, HISTORY_COST) == []
    assert hidden_costs(db.kind, kernel, recording, HISTORY_COST) == []


async def test_a_hidden_cost_no_longer_paid_must_leave_the_known_extras(db: Database) -> None:
    kernel, installed = await _both(db)
    allowed = {(db.kind, "settle", "history_record"): 1}
    problems = hidden_costs(db.kind, kernel, installed, allowed)
    assert len(problems) == 1 and "settle: history_record" in problems[0], problems
    assert "remove it" in problems[0]


class SwitchedAudit(Audit):
    """The audit extension, its hook gated by ``in_use``: off until a test sets ``on``."""

    def __init__(self) -> None:
        self.on = False

    def hooks(self, worker: WorkerView) -> Hooks:
        return Hooks(attempt_end=record, in_use=lambda: self.on)


@pytest.fixture
def audit() -> Iterator[SwitchedAudit]:
    """The switched audit extension; this process forgets its folder afterwards."""
    try:
        yield SwitchedAudit()
    finally:
        drop_folder(resources.files(Audit.package))


async def _with_audit(db: Database, audit: SwitchedAudit) -> tuple[Sequences, Sequences]:
    """The sequences with every feature installed but unused, and with the audit
    extension installed too (its migration applied, given to client and worker) and
    its gate as ``audit.on`` says."""
    async with db.client(extensions=[audit]) as cq:  # applies every migration, its too
        applied = await cq.backend.arun(_kernel.applied_migrations(), write=False)
    assert "x_audit_0001_log.sql" in applied
    return await _measure(db), await _measure(db, extensions=[audit])


@pytest.mark.fresh_schema
async def test_an_outside_extension_installed_but_not_in_use_adds_nothing(
    db: Database, audit: SwitchedAudit
) -> None:
    installed, with_audit = await _with_audit(db, audit)
    assert hidden_costs(db.kind, installed, with_audit, {}) == []


@pytest.mark.fresh_schema
async def test_an_outside_extension_in_use_costs_its_hook_s_statements(
    db: Database, audit: SwitchedAudit
) -> None:
    audit.on = True
    installed, in_use = await _with_audit(db, audit)
    assert hidden_costs(db.kind, installed, in_use, AUDIT_COST) == []


CANCEL_PATHS = ("cancel queued", "cancel running")
# What a client's cancel costs with every feature installed but unused, over the kernel
# alone: where the workflow tables exist, a cancel that ends a task decides its waiting
# dependents in its transaction (one look when it has none), whether or not a graph
# was ever submitted, and records a batch member's end (one statement when it is
# none); a cancel that only asks a running task to stop ends nothing, so runs nothing
# but the transaction the hook's presence opens. The attempt history's hook never
# runs on a cancel: a cancel ends no attempt.
CANCEL_COST: dict[tuple[str, str, str], int] = {
    ("sqlite", "cancel queued", "workflows_lock_parked"): 1,
    ("sqlite", "cancel queued", "batches_record"): 1,
    ("sqlite", "cancel queued", "savepoint op"): 1,
    ("sqlite", "cancel queued", "release op"): 1,
    ("sqlite", "cancel running", "savepoint op"): 1,
    ("sqlite", "cancel running", "release op"): 1,
    ("postgres", "cancel queued", "workflows_lock_parked"): 1,
    ("postgres", "cancel queued", "batches_record"): 1,
    ("postgres", "cancel queued", "begin"): 1,
    ("postgres", "cancel queued", "commit"): 1,
    ("postgres", "cancel running", "begin"): 1,
    ("postgres", "cancel running", "commit"): 1,
}


async def _measure_cancel(db: Database) -> Sequences:
    """A client's cancel of a queued task and of a running one, on ``db`` as it is migrated."""
    async with db.client(migrate=False) as cq:
        running = await cq.submit("job")
        await cq.backend.arun(
            _kernel.claim(["default"], "w1", 60_000, [_kernel.Draw(None, 1)], 0), write=True
        )
        warm, queued = [await cq.submit("job") for _ in range(2)]
        await cq.cancel(warm.id)  # reads the ledger for the extensions' readiness
        backend = cq.backend
        arun = backend.arun
        taps: list[Any] = []

        async def naming_arun(op: Op[Any], *, write: bool) -> Any:
            return await arun(_naming(op, taps[0]), write=write)

        backend.arun = naming_arun  # type: ignore[method-assign]
        try:
            with sent_statements(backend) as heard:
                taps.append(heard)
                ended = await cq.cancel(queued.id)
                on_queued = _names(heard)
                heard.clear()
                asked = await cq.cancel(running.id)
                on_running = _names(heard)
        finally:
            del backend.arun
    assert ended is not None and ended.status == "canceled"
    assert asked is not None and asked.cancel_requested
    return {"cancel queued": on_queued, "cancel running": on_running}


async def test_a_client_cancel_with_every_feature_installed_but_unused_costs_the_known_decision(
    db: Database, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(_readiness, "RECHECK_S", 3_600.0)
    installed = await _measure_cancel(db)
    migrate_only(db, lambda name: not name.startswith("x") or name in KERNEL_MIGRATIONS)
    kernel = await _measure_cancel(db)
    assert hidden_costs(db.kind, kernel, installed, CANCEL_COST, CANCEL_PATHS) == []
