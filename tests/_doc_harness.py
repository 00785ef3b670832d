"""Hidden setup and checks for the documentation blocks that need more than their page shows.

A block of ``docs/`` that runs only beside something its page does not show (a
handler around it, a failed task with recorded steps, the reader's payment
gateway, a client made with ``retention=``) is run by
``tests/test_site.py`` in a harness of ``HARNESS``, keyed as the ledgers there
are, by the block's page and first line. A harness is the body of a coroutine
given ``cq`` (an open client on ``cairnq.db`` in a fresh directory) and
``worker`` (a ``Worker`` of it, not started), with the line ``#>> block`` where
the block goes (``tests/_snippet.py``): the lines before it make what the block
takes from its surroundings, small stand-ins where the page leaves a service
unnamed; the lines after it check that the block did what its page says.
A harness marked ``postgres`` also sees ``DSN`` (a test database) and ``SCHEMA``
(a schema of its own, dropped afterwards).
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Harness:
    text: str
    postgres: bool = False
    env: tuple[str, ...] = ()  # variables the harness sets (the test restores them)


HARNESS: dict[tuple[str, str], Harness] = {}


def add(
    page: str, first_line: str, text: str, *, postgres: bool = False, env: tuple[str, ...] = ()
) -> None:
    """Run the block of ``page`` that starts with ``first_line`` in harness ``text``."""
    HARNESS[(page, first_line)] = Harness(text, postgres, env)


add(
    "docs/search.md",
    "from cairnq import CairnQ",
    """
    url = "sqlite:///search.db"
    #>> block
    try:
        [task] = found
        assert (task.name, task.payload, task.metadata) == (
            "order.ship", {"order": {"id": 7}}, {"customer": "acme"})
        assert await cq.search.find(where={"customer": "acme", "order": 8}) == []
    finally:
        await cq.close()
    """,
)

add(
    "docs/attempt-logs.md",
    "@worker.task",
    """
    from cairnq.testing import drain

    class CardDeclined(Exception):
        pass

    class Receipt:
        def __init__(self, id):
            self.id = id

    class Gateway:                       # a card under 1000 cents is declined
        async def charge(self, payload):
            if payload["amount"] < 1000:
                raise CardDeclined()
            return Receipt("rcpt_1")

    gateway = Gateway()
    #>> block
    paid = await cq.submit("charge", {"amount": 1200})
    declined = await cq.submit("charge", {"amount": 500}, max_attempts=1)
    await drain(worker)
    assert (await cq.get(paid.id)).result == "rcpt_1"
    assert (await cq.get(declined.id)).status == "failed"
    [paid_log] = await cq.attempts.logs(paid.id)
    [declined_log] = await cq.attempts.logs(declined.id)
    assert [(line.level, line.message) for line in paid_log.lines] == [
        ("info", "charging 1200 cents"), ("info", "receipt rcpt_1")]
    assert [(line.level, line.message) for line in declined_log.lines] == [
        ("info", "charging 500 cents"), ("warning", "card declined")]
    """,
)

add(
    "docs/uniqueness.md",
    "from datetime import timedelta",
    """
    rev, uid, msg = 3, 11, {"to": "+3300000000", "text": "hi"}
    #>> block
    assert (await cq.submit("report.build", {"customer": 42}, key="report:42",
                            unique_for="1d")).id == task.id
    [reindex] = await cq.list(name="search.reindex")
    assert reindex.payload == {"doc": 7, "rev": 3}
    assert reindex.run_at_ms - reindex.created_at_ms >= 29_000
    for _ in range(9):
        await cq.submit("sms.send", msg, throttle=Throttle(10, "1m", key=f"user:{uid}"))
    try:
        await cq.submit("sms.send", msg, throttle=Throttle(10, "1m", key=f"user:{uid}"))
    except Throttled as exc:
        assert exc.retry_after_ms > 0
    else:
        raise AssertionError("the eleventh message in a minute was not throttled")
    """,
)

add(
    "docs/batches.md",
    'batch = await cq.batches.submit([], on_complete="crawl.report", close=False)',
    """
    pages = [["https://example.com/a", "https://example.com/b"], ["https://example.com/c"]]
    #>> block
    status = await cq.batch_status(batch.id)
    assert (status.state, status.total, status.pending) == ("closed", 3, 3)
    urls = sorted(t.payload["url"] for t in await cq.list(name="crawl.fetch"))
    assert urls == ["https://example.com/a", "https://example.com/b", "https://example.com/c"]
    """,
)

add(
    "docs/batches.md",
    "status = await cq.batch_status(batch.id)   # or cq.batches.status(batch.id); None if unknown",
    """
    from cairnq.testing import drain

    @worker.task("img.resize")
    async def resize(ctx, payload):
        if payload["image"] == 2:
            raise TaskError("unreadable image")

    batch = await cq.batch(
        [{"task": "img.resize", "payload": {"image": n}, "max_attempts": 1} for n in range(4)],
        on_success="album.publish", on_failure="album.report",
        on_complete="album.cleanup",
    )
    await drain(worker)
    #>> block
    assert status.state == "done"
    assert (status.total, status.pending, status.ended, status.progress) == (4, 0, 4, 1.0)
    assert (status.succeeded, status.failed, status.canceled, status.purged) == (3, 1, 0, 0)
    assert set(status.submitted) == {"on_failure", "on_complete"}
    report = await cq.get(status.callbacks["on_failure"])
    assert (report.name, report.payload) == ("album.report", {"batch_id": batch.id})
    """,
)

add(
    "docs/events-and-sleep.md",
    'answer = await ctx.wait_for("order-42:approval", timeout="3d")',
    """
    from cairnq.testing import drain

    @worker.task("refund.approve")
    async def approve(ctx, payload):
        #>> block
        return answer

    task = await cq.submit("refund.approve", {})
    await drain(worker)
    assert (await cq.get(task.id)).status == "queued"      # parked on the wait
    await cq.events.send("order-42:approval", {"by": "ada"})
    await drain(worker)
    done = await cq.get(task.id)
    assert (done.status, done.result) == ("succeeded", {"by": "ada"})
    """,
)

add(
    "docs/events-and-sleep.md",
    'await ctx.step("welcome", send_welcome, user)',
    """
    from cairnq.testing import FakeClock, drain

    clock = FakeClock()
    cq = CairnQ.sqlite("sleeps.db", clock=clock)
    worker = Worker(cq)
    sent = []

    async def send_welcome(user):
        sent.append(("welcome", user))

    async def send_tips(user):
        sent.append(("tips", user))

    @worker.task("onboard")
    async def onboard(ctx, payload):
        user = payload["user"]
        #>> block

    try:
        task = await cq.submit("onboard", {"user": "ada"})
        await worker.run(until_idle=True)
        assert sent == [("welcome", "ada")]
        clock.advance(3 * 86_400_000 - 1)
        await worker.run(until_idle=True)
        assert (await cq.get(task.id)).status == "queued"   # a sleep never wakes early
        await drain(worker, clock=clock)
        assert sent == [("welcome", "ada"), ("tips", "ada")]
        assert (await cq.get(task.id)).status == "succeeded"
    finally:
        await worker.close()
        await cq.close()
    """,
)

add(
    "docs/durations.md",
    "from cairnq import Lineage",
    """
    from cairnq.testing import drain

    graph = {"extract": {"task": "etl.extract"}}

    @worker.task("batch.run")
    async def run_batch(ctx, payload):
        #>> block

    parent = await cq.submit("batch.run", {})
    await drain(worker)
    assert (await cq.get(parent.id)).status == "succeeded"
    [invoice] = await cq.list(name="invoice.send")
    [thumbnail] = await cq.list(name="thumbnail.make")
    [extract] = await cq.list(name="etl.extract")
    assert invoice.correlation_id == "order-7"
    assert (thumbnail.correlation_id, thumbnail.parent_id) == ("batch-3", parent.id)
    assert extract.correlation_id == "etl-2026-12-06"
    """,
)

add(
    "docs/replay.md",
    'await cq.retry(task.id, from_step="charge")          # fetch-invoice replays; charge, email run',  # noqa: E501
    """
    from cairnq.testing import drain

    ran, mail = [], {"down": True}

    async def step(name):
        ran.append(name)
        if name == "email" and mail["down"]:
            raise TaskError("mail server down")
        return name

    @worker.task("invoice.pay")
    async def pay(ctx, payload):
        for name in ("fetch-invoice", "charge", "email"):
            await ctx.step(name, step, name)

    task = await cq.submit("invoice.pay", {}, max_attempts=1)
    await drain(worker)
    assert (await cq.get(task.id)).status == "failed"
    mail["down"] = False
    #>> block
    await drain(worker)
    assert (await cq.get(task.id)).status == "succeeded"
    assert ran == ["fetch-invoice", "charge", "email", "charge", "email"]
    """,
)

add(
    "docs/flow-control.md",
    "from cairnq import Snooze",
    """
    from cairnq.testing import FakeClock, drain

    clock = FakeClock()
    cq = CairnQ.sqlite("flow.db", clock=clock)
    worker = Worker(cq)
    URL = "https://api.example.com/send"

    class Response:
        def __init__(self, status_code, headers, body):
            self.status_code, self.headers, self.body = status_code, headers, body

        def json(self):
            return self.body

    class Http:                       # busy once, then answers
        calls = 0

        async def post(self, url, json):
            self.calls += 1
            if self.calls == 1:
                return Response(429, {"Retry-After": "12"}, None)
            return Response(200, {}, {"sent": json})

    http = Http()
    try:
        task = await cq.submit("call_api", {"n": 1})
        #>> block
        assert snoozes is None                  # asked before any worker ran it
        await worker.run(until_idle=True)
        snoozes = await cq.snooze.get(task.id)
        assert (snoozes.count, snoozes.last_delay_ms) == (1, 12_000)
        assert (await cq.get(task.id)).status == "queued"
        await drain(worker, clock=clock)
        done = await cq.get(task.id)
        assert (done.status, done.result, done.attempt) == ("succeeded", {"sent": {"n": 1}}, 1)
    finally:
        await worker.close()
        await cq.close()
    """,
)

add(
    "docs/flow-control.md",
    "from cairnq import Worker",
    """
    store = cq.store
    limit_id = "concurrency:queue=emails:payload.customer"
    #>> block
    assert limit_id not in [limit.id for limit in await cq.limits.list()]
    assert [limit.id for limit in worker.limits] == [
        "concurrency:queue=emails:payload.customer", "rate:name=llm.complete"]
    await worker.close()
    """,
)

add(
    "docs/tutorial.md",
    "from cairnq import SyncCairnQ",
    """
    import asyncio, contextlib, io

    @worker.task("reports.monthly")
    async def monthly(ctx, payload):
        return {"month": payload["month"]}

    def program():
        #>> block
        return task

    with contextlib.redirect_stdout(io.StringIO()) as printed:
        async with worker.background():
            task = await asyncio.to_thread(program)
    assert printed.getvalue().splitlines() == [f"{task.id} queued", "succeeded"]
    """,
)

add(
    "docs/encryption.md",
    "import os",
    """
    import sqlite3
    from cairnq.testing import drain

    import os as system
    from cairnq.encryption import Encrypting as Ring

    system.environ["TASKS_KEY"] = Ring.generate_key()
    #>> block
    await drain(worker)
    [task] = await cq.list(name="email.send")
    assert (task.status, task.payload) == ("succeeded", {"to": "ada@example.com"})
    with sqlite3.connect("tasks.db") as raw:
        [[stored]] = raw.execute("select payload from cairnq_tasks").fetchall()
    assert '"$cairnq_enc"' in stored and "ada@example.com" not in stored
    await cq.close()
    """,
    env=("TASKS_KEY",),
)

add(
    "docs/encryption.md",
    'ring = Encrypting({"2027-01": new_key, "2026-12": old_key}, current="2027-01")',
    """
    import json, sqlite3
    from cairnq.encryption import Encrypting

    old_key, new_key = Encrypting.generate_key(), Encrypting.generate_key()
    async with CairnQ.sqlite("ring.db", codec=Encrypting({"2026-12": old_key})) as before:
        old = await before.submit("email.send", {"to": "ada@example.com"})
    #>> block
    async with CairnQ.sqlite("ring.db", codec=ring) as after:
        new = await after.submit("email.send", {"to": "grace@example.com"})
        assert (await after.get(old.id)).payload == {"to": "ada@example.com"}
        assert (await after.get(new.id)).payload == {"to": "grace@example.com"}
    with sqlite3.connect("ring.db") as raw:
        rows = dict(raw.execute("select id, payload from cairnq_tasks").fetchall())
    assert (json.loads(rows[old.id])["k"], json.loads(rows[new.id])["k"]) == ("2026-12", "2027-01")
    """,
)

add(
    "docs/connecting.md",
    'cq = CairnQ.postgres("postgresql://app@db/app", connect_timeout="5s")',
    """
    from cairnq.backends import PostgresBackend

    #>> block
    assert (cq.backend.connect_timeout_s, backend.connect_timeout_s) == (5.0, 120.0)
    await cq.close()
    """,
)

add(
    "docs/postgres.md",
    "async with pool.connection() as conn, conn.transaction():",
    """
    from psycopg_pool import AsyncConnectionPool
    from cairnq.testing import drain

    pool = AsyncConnectionPool(DSN, kwargs={"options": f"-c search_path={SCHEMA}"}, open=False)
    await pool.open()
    cq = CairnQ.postgres(pool, schema=SCHEMA)
    worker = Worker(cq)
    try:
        async with pool.connection() as conn:
            await conn.execute(f"create schema if not exists {SCHEMA}")
            await conn.execute(
                "create table orders (id int primary key, confirmed bool not null default false)"
            )
        #>> block
        await drain(worker)
        [task] = await cq.list(name="orders.confirm")
        assert (task.status, task.result) == ("succeeded", {"confirmed": 42})
        async with pool.connection() as conn:
            rows = await (await conn.execute("select id, confirmed from orders")).fetchall()
        assert rows == [(42, True)]
    finally:
        await worker.close()
        await cq.close()
        await pool.close()
    """,
    postgres=True,
)
