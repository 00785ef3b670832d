"""Limits on a real database: the limited claim, rate buckets, operator changes, bad input,
workers declaring limits, and what a worker that knows no limits does.

Claims here are the protocol's own (``ops.claim`` with a ``ClaimGate``), run on the
backend the way a worker runs them, so each count is exact. Time is a ``FakeClock``
the backend reads: rate buckets refill only when the test advances it.
"""

from __future__ import annotations

import asyncio
import datetime
import json
from collections import Counter
from collections.abc import Sequence
from typing import Any

import pytest

from cairnq import (
    CairnQ,
    InvalidArgument,
    Limit,
    LimitKeyError,
    SchemaIncomplete,
    Task,
    kernel,
)
from cairnq.extensions import Limits
from cairnq.extensions.limits._claim import MAX_SCAN, ClaimGate
from cairnq.extensions.limits._keyed import FLAVOURS
from cairnq.models import Lease, worker_of
from cairnq.protocol.steps import Call, Op, Pipelined
from cairnq.testing import FakeClock
from cairnq.worker._settling import Settler

from ._db import Database
from ._statements import sent_statements
from .test_migrate_repair import outside
from .test_without_extensions import migrate_only

START = 1_800_000_000_000
WORKER = "worker-a"


def _clock() -> FakeClock:
    return FakeClock(START)


async def _claim(
    cq: CairnQ, gate: ClaimGate | None, want: int, *, queues: Sequence[str] = ("default",)
) -> list[Any]:
    op = kernel.claim(
        list(queues),
        WORKER,
        60_000,
        [kernel.Draw(None, want)],
        10,
        points=kernel.claiming_with(gate),
    )
    return list(await cq.backend.arun(op, write=True))


async def _finish(cq: CairnQ, row: Any) -> None:
    await cq.backend.arun(kernel.complete(Lease.of(row), WORKER, None), write=True)


def _keys(rows: Sequence[Any]) -> Counter[str]:
    return Counter(Task.from_row(r).payload["customer"] for r in rows)


async def _submit(cq: CairnQ, customer: str, count: int) -> None:
    await cq.submit_many([("job", {"customer": customer}) for _ in range(count)])


async def _stored_gate(cq: CairnQ, *limits: Limit) -> ClaimGate:
    for limit in limits:
        await cq.limits.set(limit)
    return _gate(cq, limits)


def _gate(
    cq: CairnQ, limits: Sequence[Limit], *, scan: int = MAX_SCAN, path: str = "keyed"
) -> ClaimGate:
    """The gate a worker on ``cq``'s backend claims through (the keyed page where it
    can), or with ``path="general"`` the general path (statement by statement)."""
    keyed = FLAVOURS.get(cq.backend.dialect) if path == "keyed" else None
    return ClaimGate(list(limits), keyed=keyed, _scan=scan)


# The key rule is written in the keyed page statements and in the general path's
# candidate statements: the tests of the rule run through both.
both_paths = pytest.mark.parametrize("path", ["keyed", "general"])


# --- concurrency -----------------------------------------------------------------------


async def test_a_limit_of_two_per_key_claims_two_of_each_key_and_no_more(db: Database) -> None:
    async with db.client(clock=_clock()) as cq:
        gate = await _stored_gate(cq, Limit.concurrency(2, queue="default", key="payload.customer"))
        await _submit(cq, "a", 10)
        await _submit(cq, "b", 10)
        first = await _claim(cq, gate, 20)
        assert _keys(first) == {"a": 2, "b": 2}
        assert await _claim(cq, gate, 20) == []


async def test_a_finished_task_frees_its_place_for_the_same_key(db: Database) -> None:
    async with db.client(clock=_clock()) as cq:
        gate = await _stored_gate(cq, Limit.concurrency(2, queue="default", key="payload.customer"))
        await _submit(cq, "a", 5)
        first = await _claim(cq, gate, 5)
        await _finish(cq, first[0])
        again = await _claim(cq, gate, 5)
        assert _keys(again) == {"a": 1}


async def test_a_claim_that_alone_fits_the_limit_still_counts_the_keys_running(
    db: Database,
) -> None:
    """A claim wanting fewer tasks than the amount is refused a full key all the same:
    the page skips its per-key count only when the running tasks the limit governs and
    the whole claim fit within the amount together."""
    async with db.client(clock=_clock()) as cq:
        gate = await _stored_gate(cq, Limit.concurrency(3, queue="default", key="payload.customer"))
        await _submit(cq, "a", 5)
        assert _keys(await _claim(cq, gate, 3)) == {"a": 3}
        assert await _claim(cq, gate, 1) == []


async def test_a_claim_that_fits_beside_the_running_tasks_takes_up_to_the_amount(
    db: Database,
) -> None:
    async with db.client(clock=_clock()) as cq:
        gate = await _stored_gate(cq, Limit.concurrency(4, queue="default", key="payload.customer"))
        await _submit(cq, "a", 6)
        assert _keys(await _claim(cq, gate, 2)) == {"a": 2}
        assert _keys(await _claim(cq, gate, 2)) == {"a": 2}
        assert await _claim(cq, gate, 2) == []


async def test_a_claim_past_the_room_left_beside_the_running_tasks_takes_only_that_room(
    db: Database,
) -> None:
    async with db.client(clock=_clock()) as cq:
        gate = await _stored_gate(cq, Limit.concurrency(3, queue="default", key="payload.customer"))
        await _submit(cq, "a", 6)
        assert _keys(await _claim(cq, gate, 2)) == {"a": 2}
        assert _keys(await _claim(cq, gate, 2)) == {"a": 1}


async def test_a_saturated_key_does_not_hold_back_other_keys_queued_after_it(
    db: Database,
) -> None:
    async with db.client(clock=_clock()) as cq:
        gate = await _stored_gate(cq, Limit.concurrency(1, queue="default", key="payload.customer"))
        await _submit(cq, "busy", 600)  # more than two pages ahead of the others
        await _submit(cq, "b", 1)
        await _submit(cq, "c", 1)
        assert _keys(await _claim(cq, gate, 10)) == {"busy": 1, "b": 1, "c": 1}


async def test_a_limit_without_a_key_bounds_the_whole_queue(db: Database) -> None:
    async with db.client(clock=_clock()) as cq:
        gate = await _stored_gate(cq, Limit.concurrency(3, queue="default"))
        await _submit(cq, "a", 4)
        await _submit(cq, "b", 4)
        claimed = await _claim(cq, gate, 8)
        assert len(claimed) == 3
        assert [_refusal(row) for row in claimed] == [None] * 3


def _refusal(row: Any) -> Any:
    """The refusal a limited claim put on ``row`` (``None``: the task is the worker's to run)."""
    return dict(row).get("refusal")


async def test_a_worker_runs_the_tasks_of_a_limit_without_a_key(db: Database) -> None:
    worker = db.worker(
        poll_interval_ms=20, extensions=[Limits([Limit.concurrency(2, queue="default")])]
    )
    worker.register("job", lambda ctx, payload: payload["customer"])
    async with db.client() as cq:
        tasks = [await cq.submit("job", {"customer": c}) for c in "abc"]
        await worker.run(until_idle=True)
        await worker.close()
        done = [await cq.get(task.id) for task in tasks]
    assert [(t.status, t.result) for t in done if t is not None] == [
        ("succeeded", "a"),
        ("succeeded", "b"),
        ("succeeded", "c"),
    ]


async def test_a_key_over_1000_bytes_is_refused_and_counts_against_nothing(
    db: Database,
) -> None:
    async with db.client(clock=_clock()) as cq:
        gate = await _stored_gate(cq, _c_limit())
        long = [await cq.submit("job", {"c": "x" * 1001}) for _ in range(2)]
        rows = await _claim(cq, gate, 2)
        assert sorted(row["id"] for row in rows) == sorted(task.id for task in long)
        assert [_refusal(row)["code"] for row in rows] == ["limit_key"] * 2
        assert (await cq.limits.usage())[0].running == {}


async def test_a_key_another_writer_left_as_a_lone_surrogate_is_refused_and_the_queue_flows(
    sqlite_db: Database,
) -> None:
    """SQLite keeps the text a writer other than cairnq stored; PostgreSQL's jsonb
    refuses a lone surrogate, so no such row exists there."""
    async with sqlite_db.client(clock=_clock()) as cq:
        gate = await _stored_gate(cq, _c_limit())
        bad = await cq.submit("job", {"c": "placeholder"})
        outside(
            sqlite_db,
            f"""update cairnq_tasks set payload = '{{"c":"\\ud800"}}'
            where id = '{bad.id}'""",
        )
        good = await cq.submit("job", {"c": "fine"})
        rows = {row["id"]: _refusal(row) for row in await _claim(cq, gate, 2)}
        assert set(rows) == {bad.id, good.id}
        assert rows[good.id] is None
        assert rows[bad.id]["code"] == "limit_key"
        assert "surrogate" in rows[bad.id]["message"]


async def test_a_limit_on_a_task_name_leaves_other_names_unbounded(db: Database) -> None:
    async with db.client(clock=_clock()) as cq:
        gate = await _stored_gate(cq, Limit.concurrency(1, name="job"))
        await _submit(cq, "a", 3)
        await cq.submit_many([("other", {}) for _ in range(3)])
        names = Counter(r["name"] for r in await _claim(cq, gate, 10))
        assert names == {"job": 1, "other": 3}


async def test_a_task_over_its_limit_stays_queued_with_no_attempt_spent(db: Database) -> None:
    async with db.client(clock=_clock()) as cq:
        gate = await _stored_gate(cq, Limit.concurrency(1, queue="default", key="payload.customer"))
        await _submit(cq, "a", 2)
        await _claim(cq, gate, 2)
        waiting = await cq.list(status="queued")
        assert [(t.status, t.attempt) for t in waiting] == [("queued", 0)]


async def test_a_metadata_key_is_read_from_the_metadata(db: Database) -> None:
    async with db.client(clock=_clock()) as cq:
        gate = await _stored_gate(cq, Limit.concurrency(1, queue="default", key="metadata.tenant"))
        for tenant in ("t1", "t1", "t2"):
            await cq.submit("job", {}, metadata={"tenant": tenant})
        rows = await _claim(cq, gate, 3)
        assert sorted(Task.from_row(r).metadata["tenant"] for r in rows) == ["t1", "t2"]


async def test_a_queue_without_limits_is_claimed_as_without_a_gate(db: Database) -> None:
    async with db.client(clock=_clock()) as cq:
        gate = await _stored_gate(cq, Limit.concurrency(1, queue="elsewhere"))
        assert gate.governing(["default"], None) == []
        await _submit(cq, "a", 3)
        assert len(await _claim(cq, gate, 3)) == 3


# --- key values ----------------------------------------------------------------------
#
# A path key's value is compared twice: in SQL, where the candidate statement leaves out
# the tasks of saturated keys, and in Python, which computes the key it admits by. Each
# test below lets the claim read one page only (``_scan``), so a key SQL fails to leave
# out fills the page and holds back the task after it, and a key SQL wrongly leaves out
# is never seen.

ONE_PAGE = 16


def _c_limit() -> Limit:
    return Limit.concurrency(1, queue="default", key="payload.c")


def _c(rows: Sequence[Any]) -> list[Any]:
    return [Task.from_row(r).payload["c"] for r in rows]


async def _held(cq: CairnQ, gate: ClaimGate, held: Any, then: Any, *, saturate: Any) -> list[Any]:
    """Claim one task keyed ``saturate``, queue a page of ``held`` and one ``then`` behind
    them, and return the keys the next claim takes."""
    await cq.submit("job", {"c": saturate})
    assert _c(await _claim(cq, gate, 1)) == [saturate]
    await cq.submit_many([("job", {"c": held}) for _ in range(ONE_PAGE + 4)])
    await cq.submit("job", {"c": then})
    return _c(await _claim(cq, gate, 4))


@pytest.mark.parametrize(
    ("value", "neighbour"),
    [
        (7, 8),
        (-7, 7),
        (0, "-0"),
        (2**53, 2**53 + 1),
        (2**53 + 1, 2**53),
        (2**63 - 1, 2**63),
        (2**63, 2**63 + 1),
        (2**64, 2**64 + 1),
        (2**70, 2**70 + 1),
        (-(2**63), -(2**63) - 1),
        (-(2**63) - 1, -(2**63)),
        (-(2**70), -(2**70) - 1),
        ("7", "007"),
        ("007", 7),
        ("1e3", 1000),
        ("7.0", 7),
        ("-0", 0),
        (" 7", "7"),
        ("\u00e9", "e\u0301"),
        ("e\u0301", "\u00e9"),
        ("\U0001f600", "\U0001f601"),
        ("\u65e5\u672c", "\u65e5\u672c\u8a9e"),
        ('a"b\\c', 'a"b\\\\c'),
        ("it's", "its"),
    ],
    ids=repr,
)
@both_paths
async def test_a_limit_of_one_per_key_holds_each_value_and_lets_its_neighbour_pass(
    db: Database, value: Any, neighbour: Any, path: str
) -> None:
    async with db.client(clock=_clock()) as cq:
        await cq.limits.set(_c_limit())
        gate = _gate(cq, [_c_limit()], scan=ONE_PAGE, path=path)
        assert await _held(cq, gate, value, neighbour, saturate=value) == [neighbour]


@pytest.mark.parametrize(
    ("running", "same"),
    [
        (7, "7"),
        ("7", 7),
        (-5, "-5"),
        (2**63, str(2**63)),
        (str(2**63), 2**63),
        (2**70, str(2**70)),
        (str(2**70), 2**70),
        (-(2**70), str(-(2**70))),
    ],
    ids=repr,
)
@both_paths
async def test_an_integer_and_its_digits_as_a_string_are_one_key(
    db: Database, running: Any, same: Any, path: str
) -> None:
    async with db.client(clock=_clock()) as cq:
        await cq.limits.set(_c_limit())
        gate = _gate(cq, [_c_limit()], scan=ONE_PAGE, path=path)
        assert await _held(cq, gate, same, "other", saturate=running) == ["other"]


# Every text a rendering of the refused values below might come to.
LOOKALIKES = [
    "1", "0", "true", "false", "True", "7", "7.0", "1000", "1000.0", "1e3", "-0.5",
    "null", "None", "[1]", '{"a":1}', '{"a": 1}', "1.5",
]  # fmt: skip


@pytest.mark.parametrize(
    "value", [True, False, 7.0, 1000.0, 1.5, -0.5, None, [1], {"a": 1}, ""], ids=repr
)
@both_paths
async def test_a_value_the_key_rule_refuses_matches_no_saturated_key_and_fails_at_claim(
    db: Database, value: Any, path: str
) -> None:
    async with db.client(clock=_clock()) as cq:
        await cq.limits.set(_c_limit())
        gate = _gate(cq, [_c_limit()], path=path)
        await cq.submit_many([("job", {"c": text}) for text in LOOKALIKES])
        assert sorted(_c(await _claim(cq, gate, len(LOOKALIKES)))) == sorted(LOOKALIKES)
        refused = await cq.submit("job", {"c": value})
        rows = await _claim(cq, gate, 1)
        assert [row["id"] for row in rows] == [refused.id]
        assert rows[0]["refusal"]["code"] == "limit_key"


@both_paths
async def test_a_path_through_a_list_matches_no_saturated_key_and_fails_at_claim(
    db: Database, path: str
) -> None:
    limit = Limit.concurrency(1, queue="default", key="payload.a.b")
    async with db.client(clock=_clock()) as cq:
        await cq.limits.set(limit)
        gate = _gate(cq, [limit], path=path)
        await cq.submit("job", {"a": {"b": "x"}})
        assert len(await _claim(cq, gate, 1)) == 1
        listed = await cq.submit("job", {"a": [{"b": "x"}]})
        rows = await _claim(cq, gate, 1)
        assert [row["id"] for row in rows] == [listed.id]
        assert rows[0]["refusal"]["code"] == "limit_key"


@both_paths
async def test_a_path_keyed_limit_counts_a_running_tasks_own_key_not_a_record_left_for_it(
    db: Database, path: str
) -> None:
    """A key recorded for a running task (as an older worker recorded them) counts for
    nothing: the task counts under the key its payload gives, and tasks with an empty
    value are refused at claim rather than wait behind an empty key."""
    async with db.client(clock=_clock()) as cq:
        await cq.limits.set(_c_limit())
        gate = _gate(cq, [_c_limit()], scan=ONE_PAGE, path=path)
        await cq.submit("job", {"c": "x"})
        (running,) = await _claim(cq, gate, 1)
        rows = json.dumps([[running["id"], _c_limit().id, ""]])
        await cq.backend.arun(_record_keys(rows), write=True)
        assert (await cq.limits.usage())[0].running == {"x": 1}
        await cq.submit("job", {"c": "x"})
        await cq.submit_many([("job", {"c": ""}) for _ in range(ONE_PAGE + 4)])
        claimed = await _claim(cq, gate, 2)
        assert [(Task.from_row(r).payload, r["refusal"]["code"]) for r in claimed] == [
            ({"c": ""}, "limit_key"),
        ] * 2


@both_paths
async def test_a_path_keyed_limit_counts_the_running_tasks_a_claim_without_it_took(
    db: Database, path: str
) -> None:
    """Tasks claimed without the limit (by a worker that does not know it, as a reference
    SDK's worker claims) count against it while they run: the limited claim admits only
    what is left of each key's amount, and the usage shows them."""
    limit = Limit.concurrency(2, queue="default", key="payload.customer")
    async with db.client(clock=_clock()) as cq:
        await _submit(cq, "a", 2)
        await _submit(cq, "b", 1)
        assert _keys(await _claim(cq, None, 3)) == {"a": 2, "b": 1}
        gate = _gate(cq, [await cq.limits.set(limit)], path=path)
        await _submit(cq, "a", 3)
        await _submit(cq, "b", 3)
        assert _keys(await _claim(cq, gate, 6)) == {"b": 1}
        assert (await cq.limits.usage())[0].running == {"a": 2, "b": 2}


async def _claim_names(cq: CairnQ, gate: ClaimGate | None, names: list[str], want: int) -> Any:
    """Claim up to ``want`` tasks of ``names`` from the default queue through ``gate``."""
    op = kernel.claim(
        ["default"],
        WORKER,
        60_000,
        [kernel.Draw(names, want)],
        10,
        points=kernel.claiming_with(gate),
    )
    return list(await cq.backend.arun(op, write=True))


@both_paths
async def test_a_task_name_limit_counts_that_names_running_tasks_in_every_queue(
    db: Database, path: str
) -> None:
    """A limit on a task name counts the name's running tasks whichever queue they ran
    from (here claimed without the limit), not only the queue being claimed."""
    limit = Limit.concurrency(1, name="job", key="payload.customer")
    async with db.client(clock=_clock()) as cq:
        gate = _gate(cq, [await cq.limits.set(limit)], path=path)
        await cq.submit("job", {"customer": "a"}, queue="other")
        assert len(await _claim(cq, None, 1, queues=("other",))) == 1
        await _submit(cq, "a", 2)
        await _submit(cq, "b", 2)
        assert _keys(await _claim_names(cq, gate, ["job"], 4)) == {"b": 1}


@both_paths
async def test_a_task_name_limit_that_the_claim_alone_fits_counts_other_queues_running(
    db: Database, path: str
) -> None:
    """The keyed page's skip of the per-key count sees the name's running tasks in other
    queues: two of key a running elsewhere leave a limit of two no room for a third."""
    limit = Limit.concurrency(2, name="job", key="payload.customer")
    async with db.client(clock=_clock()) as cq:
        gate = _gate(cq, [await cq.limits.set(limit)], path=path)
        for _ in range(2):
            await cq.submit("job", {"customer": "a"}, queue="other")
        assert len(await _claim(cq, None, 2, queues=("other",))) == 2
        await _submit(cq, "a", 1)
        await _submit(cq, "b", 1)
        assert _keys(await _claim_names(cq, gate, ["job"], 1)) == {"b": 1}


@both_paths
async def test_a_task_name_limit_does_not_count_another_names_tasks_in_its_queue(
    db: Database, path: str
) -> None:
    """A running task of another name under the same key, in the claimed queue, leaves a
    limit on the name all its room."""
    limit = Limit.concurrency(1, name="job", key="payload.customer")
    async with db.client(clock=_clock()) as cq:
        gate = _gate(cq, [await cq.limits.set(limit)], path=path)
        await cq.submit("chore", {"customer": "a"})
        assert len(await _claim(cq, None, 1)) == 1
        await _submit(cq, "a", 2)
        assert _keys(await _claim_names(cq, gate, ["job"], 2)) == {"a": 1}


def _record_keys(rows: str) -> Op[None]:
    yield Call("limits_keys_put", {"rows": rows})


async def test_a_saturated_key_past_64_bits_does_not_block_another_keys_task(
    db: Database,
) -> None:
    """More due tasks of the saturated key than one claim looks at, then another key's."""
    worker = db.worker(poll_interval_ms=10, concurrency=2, extensions=[Limits([_c_limit()])])
    release = asyncio.Event()
    other_started = asyncio.Event()

    @worker.task
    async def job(ctx: Any, payload: Any) -> None:
        if payload["c"] == "other":
            other_started.set()
        else:
            await release.wait()

    async with db.client() as cq:
        await cq.submit_many([("job", {"c": 2**70}) for _ in range(MAX_SCAN + 105)])
        await cq.submit("job", {"c": "other"})
        async with worker.background():
            try:
                await asyncio.wait_for(other_started.wait(), timeout=8)
            finally:
                release.set()


def _noting_steps(op: Op[Any], steps: list[Any]) -> Op[Any]:
    """``op``, noting each statement it runs (its ``Call``) in ``steps``."""
    step = next(op)
    while True:
        steps.append(step)
        try:
            step = op.send((yield step))
        except StopIteration as done:
            return done.value


async def test_a_claim_under_one_path_keyed_limit_is_the_lock_and_one_page_statement(
    db: Database,
) -> None:
    """On PostgreSQL the page counts, admits and claims in one statement, sent with the
    lock (whose rows the claim does not read); on SQLite one statement admits, then the
    kernel's claim. Nothing is recorded: the count reads the running tasks' keys. (The
    claim before did not fit within the limit, so no fitting claim is tried first.)"""
    async with db.client(clock=_clock()) as cq:
        gate = await _stored_gate(cq, Limit.concurrency(2, queue="default", key="payload.customer"))
        await _submit(cq, "a", 3)
        await _submit(cq, "b", 3)
        await _claim(cq, gate, 1)  # the turn that also prunes the recorded keys
        before = _keys(await _claim(cq, gate, 6))  # does not fit: fills a and b
        assert (sum(before.values()), max(before.values())) == (3, 2)
        await _submit(cq, "c", 3)
        steps: list[Any] = []
        claim = gate.claim(["default"], None, 6, WORKER, 60_000, gate.limits)
        rows = await cq.backend.arun(Pipelined(_noting_steps(claim, steps)), write=True)
        assert _keys(rows) == {"c": 2}
        names = [step.statement for step in steps]
        expected = {
            "postgres": ["limits_lock", "limits_claim_keyed"],
            "sqlite": ["clock_now", "limits_admit_keyed", "claim_ids"],
        }
        assert names == expected[cq.backend.dialect]


async def test_a_keyed_claim_the_limit_cannot_bind_is_one_statement(db: Database) -> None:
    """The running tasks and the whole claim fit within the amount: one statement claims
    the first tasks in claim order, each with its key (on PostgreSQL after the lock)."""
    async with db.client(clock=_clock()) as cq:
        gate = await _stored_gate(cq, Limit.concurrency(3, queue="default", key="payload.customer"))
        await _submit(cq, "a", 3)
        await _submit(cq, "b", 3)
        await _claim(cq, gate, 1)  # the turn that also prunes the recorded keys
        steps: list[Any] = []
        claim = gate.claim(["default"], None, 2, WORKER, 60_000, gate.limits)
        rows = await cq.backend.arun(Pipelined(_noting_steps(claim, steps)), write=True)
        assert len(rows) == 2
        expected = {
            "postgres": ["limits_lock", "limits_claim_fitting"],
            "sqlite": ["limits_claim_fitting"],
        }
        assert [step.statement for step in steps] == expected[cq.backend.dialect]


async def test_a_claim_the_limit_cannot_bind_fails_the_tasks_whose_key_the_rule_refuses(
    db: Database,
) -> None:
    """The fitting claim refuses as the pages do: a task without the key, and one whose
    key is over 1000 bytes, are claimed to be failed with ``LimitKeyError``."""
    async with db.client(clock=_clock()) as cq:
        gate = await _stored_gate(cq, Limit.concurrency(10, queue="default", key="payload.c"))
        keyed = await cq.submit("job", {"c": "x"})
        keyless = await cq.submit("job", {"other": 1})
        too_long = await cq.submit("job", {"c": "k" * 1001})
        steps: list[Any] = []
        claim = gate.claim(["default"], None, 3, WORKER, 60_000, gate.limits)
        rows = await cq.backend.arun(Pipelined(_noting_steps(claim, steps)), write=True)
        assert "limits_claim_fitting" in [step.statement for step in steps]
        refusals = {row["id"]: (row.get("refusal") or {}).get("code") for row in rows}
        assert refusals == {keyed.id: None, keyless.id: "limit_key", too_long.id: "limit_key"}


async def test_a_keyed_claim_tries_the_fitting_claim_again_once_a_page_fit(db: Database) -> None:
    """After a claim that did not fit, claims go straight to the pages until a page
    reports that its claim fit; the claim after that tries the fitting claim first."""
    async with db.client(clock=_clock()) as cq:
        gate = await _stored_gate(cq, Limit.concurrency(3, queue="default", key="payload.customer"))
        for customer in ("a", "b", "c"):
            await _submit(cq, customer, 3)
        steps: list[Any] = []

        async def claim(want: int) -> list[Any]:
            steps.clear()
            op = gate.claim(["default"], None, want, WORKER, 60_000, gate.limits)
            return list(await cq.backend.arun(Pipelined(_noting_steps(op, steps)), write=True))

        def tried_fitting() -> bool:
            return "limits_claim_fitting" in [step.statement for step in steps]

        first = await claim(4)  # 0 running + 4 > 3: it may not fit
        assert (len(first), max(_keys(first).values()), tried_fitting()) == (4, 3, True)
        for row in first:
            await _finish(cq, row)
        assert (len(await claim(2)), tried_fitting()) == (2, False)  # it fits
        assert (len(await claim(1)), tried_fitting()) == (1, True)


async def test_a_fitting_claim_takes_no_more_than_the_pages_would_scan(db: Database) -> None:
    async with db.client(clock=_clock()) as cq:
        limit = Limit.concurrency(100, queue="default", key="payload.customer")
        await cq.limits.set(limit)
        gate = _gate(cq, [limit], scan=5)
        await _submit(cq, "a", 8)
        assert len(await _claim(cq, gate, 8)) == 5


def _pages(steps: list[Any]) -> list[int]:
    """The size of each keyed page among the noted ``steps``."""
    keyed = ("limits_claim_keyed", "limits_admit_keyed")
    return [step.params["page"] for step in steps if step.statement in keyed]


async def test_a_keyed_claim_under_a_limit_that_does_not_bind_reads_only_the_tasks_it_claims(
    db: Database,
) -> None:
    """The first page holds as many tasks as the claim wants (a page's tasks are locked
    on PostgreSQL, claimed or not); a page that admits too few is followed by one twice
    its size."""
    async with db.client(clock=_clock()) as cq:
        # 30 per key: the claim of 40 may not fit (so the pages decide), yet each of the
        # five keys gets 8.
        gate = await _stored_gate(cq, Limit.concurrency(30, queue="default", key="payload.c"))
        await cq.submit_many([("job", {"c": i % 5}) for i in range(120)])
        steps: list[Any] = []
        claim = gate.claim(["default"], None, 40, WORKER, 60_000, gate.limits)
        rows = await cq.backend.arun(Pipelined(_noting_steps(claim, steps)), write=True)
        assert (len(rows), _pages(steps)) == (40, [40])

        tight = await _stored_gate(cq, Limit.concurrency(1, queue="other", key="payload.c"))
        await cq.submit_many(
            [{"task": "job", "payload": {"c": "same"}, "queue": "other"} for _ in range(30)]
        )
        await cq.submit_many(
            [{"task": "job", "payload": {"c": i}, "queue": "other"} for i in range(20)]
        )
        steps.clear()
        claim = tight.claim(["other"], None, 20, WORKER, 60_000, tight.limits)
        rows = await cq.backend.arun(Pipelined(_noting_steps(claim, steps)), write=True)
        assert (len(rows), _pages(steps)) == (20, [20, 40])


async def test_a_one_statement_page_claims_a_task_as_the_kernel_s_claim_does(
    db: Database,
) -> None:
    """The page statement (PostgreSQL) and the claim of a limit that cannot bind it
    (SQLite) update the task row as ``claim_ids`` does."""
    limit = Limit.concurrency(2, queue="default", key="payload.customer")
    async with db.client(clock=_clock()) as cq:
        await cq.limits.set(limit)
        claimed = []
        for gate in (ClaimGate([limit]), _gate(cq, [limit])):
            task = await cq.submit("job", {"customer": "a"}, max_attempts=4)
            (row,) = await _claim(cq, gate, 1)
            assert row["id"] == task.id
            got = await cq.get(task.id)
            assert got is not None
            claimed.append(
                {k: getattr(got, k) for k in ("status", "attempt", "max_attempts", "queue")}
                | {k: row[k] for k in ("lease_until_ms", "updated_at_ms", "run_at_ms")}
                | {"worker": worker_of(row["worker_id"]), "nonce": len(row["worker_id"])}
            )
        assert claimed[0] == claimed[1]
        assert claimed[0]["status"] == "running"
        assert claimed[0]["attempt"] == 1


# --- rate ----------------------------------------------------------------------------


async def test_a_rate_limit_admits_its_burst_then_refills_with_the_clock(db: Database) -> None:
    clock = _clock()
    async with db.client(clock=clock) as cq:
        gate = await _stored_gate(cq, Limit.rate(10, per="1s", burst=3, queue="default"))
        await _submit(cq, "a", 20)
        assert len(await _claim(cq, gate, 20)) == 3
        assert await _claim(cq, gate, 20) == []
        assert gate.retry_after_ms == 100
        clock.advance(100)
        assert len(await _claim(cq, gate, 20)) == 1
        clock.advance(10_000)
        assert len(await _claim(cq, gate, 20)) == 3


async def test_a_claim_the_rate_limit_does_not_govern_forgets_the_last_claims_wait(
    db: Database,
) -> None:
    async with db.client(clock=_clock()) as cq:
        gate = await _stored_gate(cq, Limit.rate(10, per="1s", burst=1, queue="default"))
        await _submit(cq, "a", 3)
        gate.begin()
        assert len(await _claim(cq, gate, 3)) == 1
        gate.begin()
        assert await _claim(cq, gate, 3) == []
        assert gate.held_back() == (True, 100)
        gate.begin()
        assert await _claim(cq, gate, 3, queues=("other",)) == []
        assert gate.held_back() == (False, None)


async def test_a_rate_limit_per_key_keeps_a_bucket_for_each_key(db: Database) -> None:
    async with db.client(clock=_clock()) as cq:
        gate = await _stored_gate(
            cq, Limit.rate(1, per="1m", burst=2, queue="default", key="payload.customer")
        )
        await _submit(cq, "a", 5)
        await _submit(cq, "b", 5)
        assert _keys(await _claim(cq, gate, 10)) == {"a": 2, "b": 2}


async def test_rate_and_concurrency_limits_on_one_queue_must_both_have_room(db: Database) -> None:
    clock = _clock()
    async with db.client(clock=clock) as cq:
        gate = await _stored_gate(
            cq,
            Limit.concurrency(1, queue="default"),
            Limit.rate(5, per="1s", burst=5, queue="default"),
        )
        await _submit(cq, "a", 5)
        first = await _claim(cq, gate, 5)
        assert len(first) == 1
        await _finish(cq, first[0])
        assert len(await _claim(cq, gate, 5)) == 1
        usage = {u.limit.id: u for u in await cq.limits.usage()}
        assert usage["rate:queue=default"].tokens == {"": 3.0}


# --- operators -------------------------------------------------------------------------


async def test_an_operator_raising_a_limit_applies_at_the_next_claim(db: Database) -> None:
    async with db.client(clock=_clock()) as cq:
        limit = Limit.concurrency(1, queue="default", key="payload.customer", id="per-customer")
        gate = await _stored_gate(cq, limit)
        await _submit(cq, "a", 5)
        assert len(await _claim(cq, gate, 5)) == 1
        await cq.limits.set(
            Limit.concurrency(3, queue="default", key="payload.customer", id="per-customer")
        )
        assert len(await _claim(cq, gate, 5)) == 2


async def test_a_removed_limit_governs_nothing(db: Database) -> None:
    async with db.client(clock=_clock()) as cq:
        gate = await _stored_gate(cq, Limit.concurrency(1, queue="default"))
        await _submit(cq, "a", 3)
        assert await cq.limits.remove("concurrency:queue=default") is True
        assert len(await _claim(cq, gate, 3)) == 3
        assert await cq.limits.remove("concurrency:queue=default") is False


async def test_limits_are_listed_and_their_usage_counts_running_and_waiting(db: Database) -> None:
    async with db.client(clock=_clock()) as cq:
        limit = Limit.concurrency(2, queue="default", key="payload.customer")
        gate = await _stored_gate(cq, limit)
        await _submit(cq, "a", 4)
        await _submit(cq, "b", 1)
        await _claim(cq, gate, 5)
        stored = await cq.limits.list()
        assert [(lim.id, lim.amount, lim.source) for lim in stored] == [(limit.id, 2, "operator")]
        (usage,) = await cq.limits.usage()
        assert (usage.running, usage.waiting, usage.saturated) == ({"a": 2, "b": 1}, 2, ["a"])


def test_the_sync_client_sets_and_lists_limits(db: Database) -> None:
    with db.sync_client() as cq:
        cq.limits.set(Limit.rate(5, per="10s", queue="mail"))
        assert [(lim.amount, lim.period_ms, lim.burst) for lim in cq.limits.list()] == [
            (5, 10_000, 5)
        ]


# --- bad input -------------------------------------------------------------------------


@pytest.mark.parametrize(
    "per",
    [
        pytest.param(datetime.timedelta(minutes=1), id="timedelta"),
        pytest.param("1m", id="string"),
        pytest.param(60, id="seconds"),
    ],
)
def test_a_rate_period_is_a_timedelta_a_string_or_seconds(per: Any) -> None:
    assert Limit.rate(5, per=per, queue="q").period_ms == 60_000


@pytest.mark.parametrize(
    ("build", "message"),
    [
        (lambda: Limit.concurrency(0, queue="q"), "limit must be >= 1"),
        (lambda: Limit.concurrency(-3, queue="q"), "limit must be >= 1"),
        (lambda: Limit.concurrency(True, queue="q"), "must be an integer"),
        (lambda: Limit.rate(5, per=0, queue="q"), "per must be 0.001 seconds or more, got 0"),
        (lambda: Limit.rate(5, per="0s", queue="q"), "per must be 1ms or more, got '0s'"),
        (lambda: Limit.rate(5, per="60", queue="q"), "has no unit"),
        (lambda: Limit.rate(5, per=True, queue="q"), "per must be a duration"),
        (lambda: Limit.rate(5, per="soon", queue="q"), "duration"),
        (lambda: Limit.rate(5, burst=0, queue="q"), "burst must be >= 1"),
        (lambda: Limit.rate(0, per="1m", queue="q"), r"limit \(tasks per period\) must be >= 1"),
        (lambda: Limit.rate(-2, queue="q"), "a rate of 0 admits nothing; to stop claims, pause"),
        (lambda: Limit.rate("5", queue="q"), "limit must be an integer, not str"),
        (lambda: Limit.concurrency(1), "exactly one of queue"),
        (lambda: Limit.concurrency(1, queue="q", name="n"), "exactly one of queue"),
        (lambda: Limit.concurrency(1, queue="q", key="customer"), "path into the payload"),
        (lambda: Limit.concurrency(1, queue="q", key=5), "key must be a path string"),
    ],
)
def test_a_bad_limit_definition_is_refused_with_a_clear_message(build: Any, message: str) -> None:
    with pytest.raises(InvalidArgument, match=message):
        build()


def _task(payload: Any) -> Task:
    return Task(
        id="t1",
        name="job",
        status="queued",
        run_at_ms=0,
        created_at_ms=0,
        updated_at_ms=0,
        payload=payload,
    )


@pytest.mark.parametrize(
    ("key", "payload", "message"),
    [
        ("payload.customer", {}, "has no payload.customer"),
        ("payload.customer", {"customer": [1]}, "gave list, not a string"),
        (lambda task: task.payload["missing"], {}, "key function raised KeyError"),
        (lambda task: None, {}, "gave NoneType, not a string"),
        ("payload.customer", {"customer": True}, "gave bool, not a string or an integer"),
        ("payload.customer", {"customer": 7.0}, "gave float, not a string or an integer"),
        ("payload.customer", {"customer": ""}, "gave an empty string"),
        (lambda task: "", {}, "the key function gave an empty string"),
        ("payload.customer", {"customer": "\ud800"}, "gave a string with a lone surrogate"),
        ("payload.customer", {"customer": "x" * 1001}, "gave a key over 1000 bytes"),
    ],
)
def test_a_key_that_cannot_be_computed_raises_limit_key_error(
    key: Any, payload: Any, message: str
) -> None:
    limit = Limit.concurrency(1, queue="q", key=key)
    with pytest.raises(LimitKeyError, match=message):
        limit.key_of(_task(payload))


async def test_a_task_whose_key_cannot_be_computed_fails_clearly_and_the_queue_flows(
    db: Database,
) -> None:
    worker = db.worker(
        poll_interval_ms=20,
        concurrency=4,
        extensions=[
            Limits(
                [Limit.concurrency(1, queue="default", key=lambda task: task.payload["customer"])]
            )
        ],
    )
    ran: list[str] = []

    @worker.task
    async def job(ctx: Any, payload: Any) -> None:
        ran.append(payload["customer"])

    async with db.client() as cq:
        bad = await cq.submit("job", {"nobody": 1})
        good = await cq.submit("job", {"customer": "a"})
        await worker.run(until_idle=True)
        failed = await cq.get(bad.id)
        assert failed is not None and failed.status == "failed"
        assert failed.error is not None and failed.error["code"] == "limit_key"
        assert "key function raised KeyError" in failed.error["message"]
        assert (await cq.get(good.id)).status == "succeeded"  # type: ignore[union-attr]
    assert ran == ["a"]


class _LateBackend:
    """A backend whose operations start 0.3 s late: a write still pending when a run ends."""

    def __init__(self, backend: Any) -> None:
        self._backend = backend

    async def arun(self, op: Any, **options: Any) -> Any:
        await asyncio.sleep(0.3)
        return await self._backend.arun(op, **options)


async def test_an_until_idle_run_returns_once_its_refused_task_is_written_failed(
    db: Database, monkeypatch: pytest.MonkeyPatch
) -> None:
    reject = Settler.reject

    def late_reject(self: Settler, lease: Any, error: str, started: int | None = None) -> None:
        backend, self._backend = self._backend, _LateBackend(self._backend)
        try:
            reject(self, lease, error, started)
        finally:
            self._backend = backend

    monkeypatch.setattr(Settler, "reject", late_reject)
    worker = db.worker(
        poll_interval_ms=20,
        extensions=[
            Limits(
                [Limit.concurrency(1, queue="default", key=lambda task: task.payload["customer"])]
            )
        ],
    )

    @worker.task
    async def job(ctx: Any, payload: Any) -> None:
        pass

    async with db.client() as cq:
        bad = await cq.submit("job", {"nobody": 1})
        await worker.run(until_idle=True)
        refused = await cq.get(bad.id)
    assert refused is not None and refused.status == "failed"


# --- workers -----------------------------------------------------------------------------


async def test_a_worker_stores_its_limits_and_never_runs_more_than_the_limit_per_key(
    db: Database,
) -> None:
    worker = db.worker(
        poll_interval_ms=10,
        concurrency=12,
        extensions=[Limits([Limit.concurrency(2, queue="default", key="payload.customer")])],
    )
    running: Counter[str] = Counter()
    peak: Counter[str] = Counter()

    @worker.task
    async def job(ctx: Any, payload: Any) -> None:
        key = payload["customer"]
        running[key] += 1
        peak[key] = max(peak[key], running[key])
        await asyncio.sleep(0.01)
        running[key] -= 1

    async with db.client() as cq:
        for customer in ("a", "b", "c"):
            await _submit(cq, customer, 12)
        await worker.run(until_idle=True)
        stored = await cq.limits.list()
        assert [(lim.source, lim.amount) for lim in stored] == [("worker", 2)]
        assert await cq.stats() == {
            "default": {
                **dict.fromkeys(("queued", "running", "failed", "canceled"), 0),
                "succeeded": 36,
            }
        }
    assert peak == {"a": 2, "b": 2, "c": 2}


def _migrate_all_but_limits(db: Database) -> None:
    migrate_only(db, lambda name: name not in ("x0006_limits.sql", "x0015_limit_keys_unbound.sql"))


async def test_a_worker_declaring_limits_refuses_a_database_without_them(db: Database) -> None:
    _migrate_all_but_limits(db)
    client = CairnQ(db.backend(migrate=False))
    worker = _worker_on(client, extensions=[Limits([Limit.concurrency(1, queue="default")])])
    with pytest.raises(SchemaIncomplete, match=r"declares 1 limit\(s\).*x0006_limits\.sql"):
        await worker.run(until_idle=True)
    await client.close()


async def test_a_worker_without_limits_runs_as_before_on_a_database_without_them(
    db: Database,
) -> None:
    _migrate_all_but_limits(db)
    client = CairnQ(db.backend(migrate=False))
    worker = _worker_on(client)
    ran: list[int] = []

    @worker.task
    async def job(ctx: Any, payload: Any) -> None:
        ran.append(1)

    await client.submit("job")
    await worker.run(until_idle=True)
    await client.close()
    assert ran == [1]


def _worker_on(client: CairnQ, **options: Any) -> Any:
    from cairnq import Worker

    return Worker(client, poll_interval_ms=20, **options)


async def test_a_claim_without_a_gate_takes_limited_tasks_freely(db: Database) -> None:
    """What a worker that knows no limits does (a reference SDK's worker sharing the
    queue): it claims limited tasks like any others, so the limit no longer holds."""
    async with db.client(clock=_clock()) as cq:
        await _stored_gate(cq, Limit.concurrency(1, queue="default"))
        await _submit(cq, "a", 3)
        assert len(await _claim(cq, None, 3)) == 3


def test_the_command_line_sets_lists_and_removes_a_limit(tmp_path: Any) -> None:
    import io

    from cairnq.cli import main

    where = ["--db", f"sqlite:///{tmp_path / 'cli.db'}"]
    out = io.StringIO()
    assert main([*where, "migrate"], out) == 0
    assert (
        main([*where, "limits", "set", "2", "--queue", "emails", "--key", "payload.customer"], out)
        == 0
    )
    assert main([*where, "limits", "set", "0", "--queue", "emails"], out) == 1
    listing = io.StringIO()
    assert main([*where, "limits", "ls"], listing) == 0
    assert "2 running at once per payload.customer in queue emails" in listing.getvalue()
    assert main([*where, "limits", "rm", "concurrency:queue=emails:payload.customer"], out) == 0
    empty = io.StringIO()
    assert main([*where, "limits", "ls"], empty) == 0
    assert empty.getvalue() == "no limits\n"


async def test_a_claim_waiting_for_the_limits_lock_counts_the_tasks_claimed_while_it_waited(
    pg_db: Database,
) -> None:
    """On PostgreSQL the lock and the fitting claim go as one message that commits by
    itself; the claim's snapshot is taken once the lock is held. Another session holds
    the lock while it sets 3 tasks running under a limit of 4: the claim of 2 waits, then
    counts those 3, does not fit, and the pages admit 1."""
    import psycopg

    from .test_postgres import _until_waiting_on_a_lock

    async with pg_db.client(clock=_clock()) as cq:
        limit = Limit.concurrency(4, queue="default")
        gate = await _stored_gate(cq, limit)
        await _submit(cq, "a", 10)
        async with await psycopg.AsyncConnection.connect(pg_db.url) as other:
            await other.execute(f'set search_path to "{pg_db.schema}"')
            await other.execute(
                "select 1 from cairnq_limits where name = %s for update", [limit.id]
            )
            await other.execute(
                "update cairnq_tasks set status = 'running', worker_id = 'other', "
                "attempt = attempt + 1, lease_until_ms = %s where id in "
                "(select id from cairnq_tasks where status = 'queued' order by id limit 3)",
                [START + 60_000],
            )
            op = kernel.claim(
                ["default"],
                WORKER,
                60_000,
                [kernel.Draw(None, 2)],
                0,
                points=kernel.claiming_with(gate),
                alone=True,
            )
            claim = asyncio.ensure_future(cq.backend.arun(op, write=True))
            await _until_waiting_on_a_lock(pg_db, or_done=claim)
            assert not claim.done()
            await other.commit()
            rows = await claim
        assert len(rows) == 1
        assert len(await cq.list(status="running")) == 4


def _kernel_claim(gate: ClaimGate, *draws: kernel.Draw) -> Op[list[Any]]:
    """A worker's claim with news of work: no recovery first, so the claim begins with
    the draws' statements."""
    return kernel.claim(
        ["default"], WORKER, 60_000, list(draws), 0, points=kernel.claiming_with(gate), alone=True
    )


async def test_a_claim_the_limit_cannot_bind_sends_no_transaction_block_on_postgresql(
    db: Database,
) -> None:
    """The lock and the fitting claim commit at once, as one implicit transaction: no
    begin and no commit reach PostgreSQL. SQLite runs them in its write transaction."""
    async with db.client(clock=_clock()) as cq:
        gate = await _stored_gate(
            cq, Limit.concurrency(10, queue="default", key="payload.customer")
        )
        await _submit(cq, "a", 3)
        with sent_statements(cq) as heard:
            rows = await cq.backend.arun(_kernel_claim(gate, kernel.Draw(None, 2)), write=True)
        assert len(rows) == 2
        commands = [
            t.split()[0].lower() for t in heard if t.split()[0].lower() in {"begin", "commit"}
        ]
        assert commands == {"postgres": [], "sqlite": ["begin", "commit"]}[cq.backend.dialect]


async def test_only_the_last_draw_of_a_claim_may_commit_its_fitting_claim_apart(
    db: Database,
) -> None:
    """A draw followed by another is claimed in the claim's transaction, so a failure in
    the later draw cannot leave the earlier one's tasks claimed for nobody."""
    async with db.client(clock=_clock()) as cq:
        gate = await _stored_gate(
            cq, Limit.concurrency(10, queue="default", key="payload.customer")
        )
        await _submit(cq, "a", 4)
        steps: list[Any] = []
        claim = _kernel_claim(gate, kernel.Draw(["job"], 1), kernel.Draw(["job"], 1))
        rows = await cq.backend.arun(Pipelined(_noting_steps(claim, steps)), write=True)
        assert len(rows) == 2
        fitting = [step.apart for step in steps if step.statement == "limits_claim_fitting"]
        assert fitting == {"postgres": [False, True], "sqlite": [False, False]}[cq.backend.dialect]


async def test_the_pages_after_a_fitting_claim_that_took_nothing_are_one_transaction(
    db: Database,
) -> None:
    """The fitting claim (apart, with its lock) does not fit; the pages take the lock
    again and none of them commits apart, so a later page's failure undoes them all."""
    async with db.client(clock=_clock()) as cq:
        gate = await _stored_gate(cq, Limit.concurrency(2, queue="default", key="payload.customer"))
        await _submit(cq, "a", 3)
        steps: list[Any] = []
        claim = _kernel_claim(gate, kernel.Draw(None, 3))
        rows = await cq.backend.arun(Pipelined(_noting_steps(claim, steps)), write=True)
        assert _keys(rows) == {"a": 2}
        sent = [(step.statement, step.apart) for step in steps]
        expected = {
            "postgres": [
                ("limits_lock", True),
                ("limits_keys_prune", True),
                ("limits_claim_fitting", True),
                ("limits_lock", False),
                ("limits_claim_keyed", False),
            ],
            "sqlite": [
                ("limits_keys_prune", False),
                ("limits_claim_fitting", False),
                ("clock_now", False),
                ("limits_admit_keyed", False),
                ("claim_ids", False),
            ],
        }
        assert sent == expected[cq.backend.dialect]
