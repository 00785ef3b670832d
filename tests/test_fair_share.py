"""Fair share on a real database: a queue's claims shared among the values of a key.

Claims here are the protocol's own (``kernel.claim`` with a ``ClaimGate`` holding the
shares), run on the backend the way a worker runs them, so each count is exact.
"""

from __future__ import annotations

import asyncio
import contextlib
import re
import sqlite3
import sys
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from cairnq import CairnQ, InvalidArgument, Limit, SchemaIncomplete, Task, kernel
from cairnq.extensions import Limits
from cairnq.extensions.limits._claim import ClaimGate
from cairnq.extensions.limits._fair import FairClaimer, list_shares, put_share, remove_share
from cairnq.extensions.limits._keyed import FLAVOURS
from cairnq.limits import FairShare
from cairnq.models import Lease
from cairnq.testing import FakeClock

from ._db import Database, admin_connect
from .test_without_extensions import migrate_only

START = 1_800_000_000_000
WORKER = "worker-a"
SMALL = [f"small-{n}" for n in range(9)]


async def _share(cq: CairnQ, share: FairShare, *limits: Limit) -> ClaimGate:
    """Store ``share`` (and ``limits``) and return the gate a worker claims through."""
    await cq.backend.arun(put_share(share), write=True)
    for limit in limits:
        await cq.limits.set(limit)
    flavour = FLAVOURS[cq.backend.dialect]
    shares = await cq.backend.arun(list_shares(), write=False)
    return ClaimGate(list(limits), keyed=flavour, shares=shares, fair=FairClaimer(flavour))


async def _claim(cq: CairnQ, gate: ClaimGate | None, want: int) -> list[Any]:
    op = kernel.claim(
        ["default"],
        WORKER,
        60_000,
        [kernel.Draw(None, want)],
        10,
        points=kernel.claiming_with(gate),
    )
    return list(await cq.backend.arun(op, write=True))


async def _finish(cq: CairnQ, rows: Sequence[Any]) -> None:
    for row in rows:
        await cq.backend.arun(kernel.complete(Lease.of(row), WORKER, None), write=True)


def _tenants(rows: Sequence[Any]) -> Counter[str]:
    return Counter(str(Task.from_row(r).payload.get("tenant")) for r in rows)


async def _submit(cq: CairnQ, tenant: Any, count: int) -> None:
    await cq.submit_many([("job", {"tenant": tenant}) for _ in range(count)])


def _fair(**weights: int) -> FairShare:
    return FairShare(queue="default", key="payload.tenant", weights=weights or None)


async def test_nine_small_tenants_are_claimed_interleaved_with_a_big_one_submitted_first(
    db: Database,
) -> None:
    async with db.client(clock=FakeClock(START)) as cq:
        gate = await _share(cq, _fair())
        await _submit(cq, "big", 300)
        for tenant in SMALL:
            await _submit(cq, tenant, 5)
        # Each round claims one task per tenant, finishes them, and claims again.
        for _ in range(5):
            rows = await _claim(cq, gate, 10)
            assert _tenants(rows) == Counter({"big": 1, **dict.fromkeys(SMALL, 1)})
            await _finish(cq, rows)
        # The small tenants are done: the big one gets every claim.
        rows = await _claim(cq, gate, 10)
        assert _tenants(rows) == {"big": 10}


async def test_a_key_alone_gets_every_task_a_claim_wants(db: Database) -> None:
    async with db.client(clock=FakeClock(START)) as cq:
        gate = await _share(cq, _fair())
        await _submit(cq, "big", 30)
        assert _tenants(await _claim(cq, gate, 25)) == {"big": 25}


async def test_a_key_of_weight_three_gets_three_tasks_for_each_of_a_key_of_weight_one(
    db: Database,
) -> None:
    async with db.client(clock=FakeClock(START)) as cq:
        gate = await _share(cq, _fair(a=3))
        await _submit(cq, "a", 20)
        await _submit(cq, "b", 20)
        assert _tenants(await _claim(cq, gate, 8)) == {"a": 6, "b": 2}


async def test_a_key_with_running_tasks_waits_for_the_keys_with_fewer(db: Database) -> None:
    async with db.client(clock=FakeClock(START)) as cq:
        gate = await _share(cq, _fair())
        await _submit(cq, "a", 20)
        assert _tenants(await _claim(cq, gate, 3)) == {"a": 3}
        await _submit(cq, "b", 20)
        await _submit(cq, "c", 20)
        # a runs 3: b and c catch up to 3 each before a gets a fourth.
        assert _tenants(await _claim(cq, gate, 6)) == {"b": 3, "c": 3}


async def test_a_concurrency_limit_on_the_same_key_caps_each_key_on_top(db: Database) -> None:
    async with db.client(clock=FakeClock(START)) as cq:
        cap = Limit.concurrency(2, queue="default", key="payload.tenant")
        gate = await _share(cq, _fair(), cap)
        await _submit(cq, "big", 50)
        await _submit(cq, "small", 50)
        assert _tenants(await _claim(cq, gate, 10)) == {"big": 2, "small": 2}
        assert await _claim(cq, gate, 10) == []


async def test_a_cap_counts_the_running_tasks_a_claim_without_it_took(db: Database) -> None:
    """Under a cap, a tenant's tasks running from a claim that knew neither the share nor
    the limit (as a reference SDK's worker claims) fill its place: the fair claim gives
    the others theirs and that tenant none."""
    async with db.client(clock=FakeClock(START)) as cq:
        cap = Limit.concurrency(2, queue="default", key="payload.tenant")
        await _submit(cq, "big", 2)
        assert _tenants(await _claim(cq, None, 2)) == {"big": 2}
        gate = await _share(cq, _fair(), cap)
        await _submit(cq, "big", 10)
        await _submit(cq, "small", 10)
        assert _tenants(await _claim(cq, gate, 10)) == {"small": 2}


async def test_a_debounce_that_gives_a_queued_task_another_tenant_shares_it_under_that_one(
    db: Database,
) -> None:
    """Under a cap, the revised task waits for its new tenant's room: it is shared, and
    admitted, under the key its payload now gives, not the one it was submitted with."""
    clock = FakeClock(START)
    async with db.client(clock=clock) as cq:
        cap = Limit.concurrency(1, queue="default", key="payload.tenant")
        gate = await _share(cq, _fair(), cap)
        await _submit(cq, "a", 1)
        assert _tenants(await _claim(cq, gate, 1)) == {"a": 1}
        await cq.submit("job", {"tenant": "b"}, key="k", debounce="1s")
        await cq.submit("job", {"tenant": "a"}, key="k", debounce="1s")
        clock.advance(1_000)
        assert await _claim(cq, gate, 5) == []
        await cq.submit("job", {"tenant": "b"}, key="k", debounce="1s")
        clock.advance(1_000)
        assert _tenants(await _claim(cq, gate, 5)) == {"b": 1}


def _fair_keys(db: Database) -> dict[str, str]:
    """Each task in the fair share's index, with the key it is shared under."""
    query = "select task_id, key_value from cairnq_fair_tasks"
    if db.kind == "sqlite":
        with contextlib.closing(sqlite3.connect(db.path)) as conn:  # type: ignore[arg-type]
            return dict(conn.execute(query).fetchall())
    with admin_connect(db.url) as conn:
        conn.execute(f'set search_path to "{db.schema}"')
        return dict(conn.execute(query).fetchall())


@pytest.mark.parametrize(
    "value",
    ["x", "7", "007", "", 7, -7, 0, 2**63, 2**70, -(2**70), 1.5, True, None, [1], {"a": 1}],
    ids=repr,
)
async def test_a_revised_task_is_shared_under_the_key_a_submit_of_its_payload_gets(
    db: Database, value: Any
) -> None:
    """The update trigger keys a revised task as the insert trigger keys a new one (or,
    for a value the key rule refuses, leaves it out of the share)."""
    clock = FakeClock(START)
    async with db.client(clock=clock) as cq:
        await _share(cq, _fair())
        fresh = await cq.submit("job", {"tenant": value})
        first = await cq.submit("job", {"tenant": "first"}, key="k", debounce="1s")
        revised = await cq.submit("job", {"tenant": value}, key="k", debounce="1s")
        assert revised.id == first.id
        keys = _fair_keys(db)
        assert keys.get(revised.id) == keys.get(fresh.id)
        assert (revised.id in keys) == (value not in ("", 1.5, True, None, [1], {"a": 1}))


async def test_an_integer_key_and_its_digits_as_a_string_are_one_tenant(db: Database) -> None:
    async with db.client(clock=FakeClock(START)) as cq:
        gate = await _share(cq, _fair())
        await _submit(cq, 7, 5)
        await _submit(cq, "7", 5)
        await _submit(cq, "x", 10)
        assert _tenants(await _claim(cq, gate, 4)) == {"7": 2, "x": 2}


async def test_a_task_without_a_key_is_claimed_once_the_shared_tasks_leave_room(
    db: Database,
) -> None:
    async with db.client(clock=FakeClock(START)) as cq:
        gate = await _share(cq, _fair())
        await cq.submit("job", {"other": 1})
        await _submit(cq, "a", 2)
        rows = await _claim(cq, gate, 10)
        assert _tenants(rows) == {"a": 2, "None": 1}


async def test_a_retried_task_is_shared_again_when_it_is_queued_again(db: Database) -> None:
    async with db.client(clock=FakeClock(START)) as cq:
        gate = await _share(cq, _fair())
        await _submit(cq, "big", 30)
        await _submit(cq, "small", 1)
        first = await _claim(cq, gate, 2)
        assert _tenants(first) == {"big": 1, "small": 1}
        (small,) = [r for r in first if Task.from_row(r).payload["tenant"] == "small"]
        failed = kernel.fail(
            Lease.of(small), WORKER, '{"message": "no"}', retryable=True, delay_ms=0
        )
        await cq.backend.arun(failed, write=True)
        # big runs one, small none: small's retry goes first.
        assert _tenants(await _claim(cq, gate, 1)) == {"small": 1}


async def test_tasks_queued_before_the_share_was_declared_are_shared(db: Database) -> None:
    async with db.client(clock=FakeClock(START)) as cq:
        await _submit(cq, "big", 40)
        await _submit(cq, "small", 2)
        gate = await _share(cq, _fair())
        assert _tenants(await _claim(cq, gate, 4)) == {"big": 2, "small": 2}


async def test_a_share_keyed_by_another_path_records_the_keys_again(db: Database) -> None:
    async with db.client(clock=FakeClock(START)) as cq:
        await _share(cq, FairShare(queue="default", key="payload.region"))
        await _submit(cq, "big", 40)
        await _submit(cq, "small", 2)
        gate = await _share(cq, _fair())
        assert _tenants(await _claim(cq, gate, 4)) == {"big": 2, "small": 2}


def _insert_trigger(db: Database, *, drop: bool = False) -> bool:
    """Whether ``cairnq_fair_index`` exists on ``cairnq_tasks`` (dropped first with ``drop``:
    a database migrated while no queue was shared, or upgraded past x0027 on SQLite)."""
    if db.kind == "sqlite":
        with contextlib.closing(sqlite3.connect(db.path)) as conn:  # type: ignore[arg-type]
            if drop:
                conn.execute("drop trigger cairnq_fair_index")
                conn.commit()
            found = "select count(*) from sqlite_master where name = 'cairnq_fair_index'"
            return bool(conn.execute(found).fetchone()[0])
    with admin_connect(db.url) as conn:
        conn.execute(f'set search_path to "{db.schema}"')
        if drop:
            conn.execute("drop trigger cairnq_fair_index on cairnq_tasks")
        found = (
            "select count(*) from pg_trigger "
            "where tgname = 'cairnq_fair_index' and tgrelid = 'cairnq_tasks'::regclass"
        )
        return bool(conn.execute(found).fetchone()[0])


async def test_on_sqlite_the_insert_trigger_exists_only_once_a_queue_is_shared(
    sqlite_db: Database,
) -> None:
    async with sqlite_db.client(clock=FakeClock(START)) as cq:
        await _submit(cq, "big", 1)
        assert not _insert_trigger(sqlite_db)
        await _share(cq, _fair())
        assert _insert_trigger(sqlite_db)


async def test_a_share_stored_again_records_the_tasks_inserted_while_its_trigger_was_missing(
    db: Database,
) -> None:
    async with db.client(clock=FakeClock(START)) as cq:
        await _share(cq, _fair())
        _insert_trigger(db, drop=True)
        await _submit(cq, "big", 40)
        await _submit(cq, "small", 2)
        gate = await _share(cq, _fair())
        assert _insert_trigger(db)
        assert _tenants(await _claim(cq, gate, 4)) == {"big": 2, "small": 2}


async def test_a_removed_share_leaves_the_queue_claimed_in_queue_order(db: Database) -> None:
    async with db.client(clock=FakeClock(START)) as cq:
        await _share(cq, _fair())
        assert await cq.backend.arun(remove_share("default"), write=True) is True
        assert await cq.backend.arun(list_shares(), write=False) == []
        await _submit(cq, "big", 40)
        await _submit(cq, "small", 2)
        assert _tenants(await _claim(cq, None, 4)) == {"big": 4}


async def test_a_claim_without_the_gate_takes_shared_tasks_in_queue_order(db: Database) -> None:
    """What a worker that knows no fair share does (a reference SDK's worker sharing the
    queue): it claims the oldest tasks, whatever their key."""
    async with db.client(clock=FakeClock(START)) as cq:
        await _share(cq, _fair())
        await _submit(cq, "big", 40)
        await _submit(cq, "small", 2)
        assert _tenants(await _claim(cq, None, 4)) == {"big": 4}


async def test_a_worker_with_a_fair_share_runs_every_task(db: Database) -> None:
    worker = db.worker(
        poll_interval_ms=10,
        concurrency=4,
        extensions=[Limits(fair=[_fair(big=2)])],
    )
    order: list[str] = []

    @worker.task
    async def job(ctx: Any, payload: Any) -> None:
        order.append(payload["tenant"])
        await asyncio.sleep(0)

    async with db.client() as cq:
        await _submit(cq, "big", 40)
        await _submit(cq, "small", 4)
        await worker.run(until_idle=True)
        assert [s.queue for s in await cq.backend.arun(list_shares(), write=False)] == ["default"]
        assert await cq.stats() == {
            "default": {
                **dict.fromkeys(("queued", "running", "failed", "canceled"), 0),
                "succeeded": 44,
            }
        }
    assert Counter(order) == {"big": 40, "small": 4}
    # The small tenant's four ran among the first twenty, not after the big one's forty.
    assert order.index("small") < 20
    assert max(i for i, t in enumerate(order) if t == "small") < 20


async def test_a_worker_declaring_a_fair_share_refuses_a_database_without_it(
    db: Database,
) -> None:
    from cairnq import Worker

    migrate_only(db, lambda name: name != "x0022_fair_share.sql")
    client = CairnQ(db.backend(migrate=False))
    worker = Worker(client, poll_interval_ms=20, extensions=[Limits(fair=[_fair()])])
    with pytest.raises(SchemaIncomplete, match=r"1 fair share\(s\).*x0022_fair_share\.sql"):
        await worker.run(until_idle=True)
    await client.close()


# --- bad input: one test per option, refused before anything is written -----------------


@pytest.mark.parametrize("queue", ["", 3, None])
def test_a_fair_share_s_queue_must_be_a_non_empty_string(queue: Any) -> None:
    with pytest.raises(InvalidArgument, match="queue must be a non-empty string"):
        FairShare(queue=queue, key="payload.tenant")


@pytest.mark.parametrize(
    ("key", "message"),
    [
        ("tenant", "must be a path into the payload or the metadata"),
        ("payload.", "must be a path into the payload or the metadata"),
        ("body.tenant", "must be a path into the payload or the metadata"),
        (lambda task: "x", "must be a path string, not function"),
    ],
)
def test_a_fair_share_s_key_must_be_a_path_into_the_payload_or_metadata(
    key: Any, message: str
) -> None:
    with pytest.raises(InvalidArgument, match=message):
        FairShare(queue="default", key=key)


@pytest.mark.parametrize(
    ("weights", "message"),
    [
        ([("a", 2)], "weights must be a mapping"),
        ({"a": 0}, "must be between 1 and"),
        ({"a": 2**31}, "must be between 1 and"),
        ({"a": 1.5}, "must be an integer, not float"),
        ({"a": True}, "must be an integer, not bool"),
        ({"": 2}, "empty string"),
        ({1.5: 2}, "gave float"),
        ({7: 2, "7": 3}, "given twice"),
    ],
)
def test_a_fair_share_s_weights_must_map_keys_to_integers_from_one(
    weights: Any, message: str
) -> None:
    with pytest.raises(InvalidArgument, match=message):
        FairShare(queue="default", key="payload.tenant", weights=weights)


@pytest.mark.parametrize(
    ("fair", "message"),
    [
        (FairShare(queue="q", key="payload.t"), "not a single FairShare"),
        ("q", "not str"),
        ([Limit.concurrency(1, queue="q")], "entries must be FairShare values, not Limit"),
        (
            [FairShare(queue="q", key="payload.t"), FairShare(queue="q", key="payload.u")],
            "two fair shares name the queue 'q'",
        ),
    ],
)
def test_the_limits_fair_option_takes_a_list_of_fair_shares_one_per_queue(
    fair: Any, message: str
) -> None:
    with pytest.raises(InvalidArgument, match=message):
        Limits(fair=fair)


async def test_a_refused_fair_option_writes_nothing(db: Database) -> None:
    async with db.client() as cq:
        with pytest.raises(InvalidArgument):
            Limits(fair=[_fair(), _fair()])
        assert await cq.backend.arun(list_shares(), write=False) == []


def _trigger_text(path: Path) -> str:
    """The ``cairnq_fair_index`` trigger's text in the SQL file at ``path``."""
    found = re.search(
        r"create trigger if not exists cairnq_fair_index\b.*?\nend;", path.read_text(), re.S
    )
    assert found is not None, path
    return found.group(0)


def test_the_sqlite_trigger_a_share_arms_is_the_one_its_migration_created() -> None:
    # x0022 created the trigger and x0027 drops it while no queue is shared; storing a
    # share creates it again from limits_fair_arm.sql. A migration is never edited, so
    # the two copies are held together here.
    root = Path(sys.modules[Limits.__module__].__file__ or "").parent
    migrated = _trigger_text(root / "migrations" / "sqlite" / "x0022_fair_share.sql")
    armed = _trigger_text(root / "sql" / "sqlite" / "limits_fair_arm.sql")
    assert armed == migrated
