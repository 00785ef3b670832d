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
    imports: tuple[str, ...] = ()  # packages beyond the core's (skipped without them)


HARNESS: dict[tuple[str, str], Harness] = {}


def add(
    page: str,
    first_line: str,
    text: str,
    *,
    postgres: bool = False,
    env: tuple[str, ...] = (),
    imports: tuple[str, ...] = (),
) -> None:
    """Run the block of ``page`` that starts with ``first_line`` in harness ``text``."""
    HARNESS[(page, first_line)] = Harness(text, postgres, env, imports)


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

add(
    "docs/durations.md",
    "from datetime import timedelta",
    """
    from cairnq.backends import PostgresBackend
    from cairnq.testing import FakeClock, drain

    clock = FakeClock()
    cq = CairnQ.sqlite("durations.db", clock=clock)
    built = Worker(cq)

    @built.task("report.build")
    async def build(ctx, payload):
        return "built"

    old = await cq.submit("report.build", {})
    await drain(built)
    clock.advance(8 * 86_400_000)
    task = await cq.submit("report.build", {})
    await drain(built)
    await built.close()
    first, dsn = cq, "postgresql://app@db/app"
    #>> block
    try:
        assert (worker.lease_ms, worker.heartbeat_interval_ms, worker.drain_timeout_ms) == (
            60_000, 10_000, 120_000)
        assert (task.status, task.result) == ("succeeded", "built")
        assert await first.get(old.id) is None            # purged: succeeded 8 days ago
        assert (await first.get(task.id)).status == "succeeded"
        assert (backend.op_timeout_s, backend.listen_health_s) == (30.0, 20.0)
    finally:
        await worker.close()
        await first.close()
        await cq.close()
    """,
)

add(
    "docs/retention.md",
    "from cairnq import Retention, RetentionRule",
    """
    from cairnq.testing import FakeClock, drain

    clock = FakeClock()
    from cairnq import Retention as Keep

    cq = CairnQ.sqlite("kept.db", clock=clock, retention=Keep({"succeeded": 86_400_000}))
    runner = Worker(cq)

    @runner.task("thumbnail.make")
    async def make(ctx, payload):
        return None

    old = await cq.submit("thumbnail.make", {})
    await drain(runner)
    clock.advance(2 * 86_400_000)
    recent = await cq.submit("thumbnail.make", {})
    await drain(runner)
    await runner.close()
    try:
        #>> block
        assert await cq.get(old.id) is None
        assert (await cq.get(recent.id)).status == "succeeded"
        assert [rule.older_than_ms for rule in policy.rules] == [3_600_000, 30 * 86_400_000]
    finally:
        await worker.close()
        await cq.close()
    """,
)

add(
    "docs/tasks.md",
    "from cairnq import CairnQ, Lineage, TaskDef, TaskError, TaskFailed, TaskTimeout",
    """
    import contextlib, io

    addresses = ["grace@example.com", "alan@example.com"]
    server = Worker.sqlite("cairnq.db", queues=["emails"])

    @server.task("email.send")
    async def send_email(ctx, payload):
        return {"sent": payload["to"]}

    client = cq
    with contextlib.redirect_stdout(io.StringIO()) as printed:
        async with server.background():
            #>> block
    try:
        assert printed.getvalue() == ""                    # no TaskTimeout
        assert (done.id, done.status, done.attempt) == (task.id, "succeeded", 1)
        assert result == {"sent": "grace@example.com"}
        assert [t.payload for t in tasks] == [{"to": a} for a in addresses]
        assert (await cq.get_by_key("welcome:alan@example.com")).id in ids
        assert len(ids) == 2
    finally:
        await server.close()
        await cq.close()
    """,
)

add(
    "docs/tasks.md",
    'worker = Worker.sqlite("cairnq.db", queues=["emails", "default"], concurrency=8,',
    """
    from cairnq.testing import drain

    send = TaskDef[dict, dict]("email.send", queue="emails", max_attempts=5)
    first = worker
    #>> block
    try:
        good = await cq.submit(send, {"to": "ada@example.com"})
        bad = await cq.submit(send, {"to": "nobody"})
        texts = [await cq.submit("embed", {"text": t}) for t in ("a", "bcd", "ef")]
        render = await cq.submit("gpu.render", {})
        train = await cq.submit("gpu.train", {})
        await drain(worker)
        good, bad = await cq.get(good.id), await cq.get(bad.id)
        assert (good.status, good.result["sent"]) == ("succeeded", True)
        audit = await cq.get(good.result["audit"])
        assert (audit.name, audit.payload, audit.parent_id) == (
            "email.audit", {"to": "ada@example.com"}, good.id)
        assert (bad.status, bad.attempt, bad.error["code"]) == ("failed", 1, "bad_address")
        assert [(await cq.get(t.id)).result for t in texts] == [1, 3, 2]
        assert [(await cq.get(t.id)).status for t in (render, train)] == ["succeeded"] * 2
    finally:
        await worker.close()
        await first.close()
    """,
)

add(
    "docs/cancel-and-versions.md",
    '@worker.task(version=3)                        # or "2026-12-06", any text up to 200 characters',  # noqa: E501
    """
    from cairnq.extensions import Steps
    from cairnq.testing import drain

    first, runs = worker, {"n": 0}

    async def post(ctx, payload):
        await ctx.step("entry", lambda: "posted")
        runs["n"] += 1
        if runs["n"] == 1:
            raise TaskError("ledger busy")

    #>> block
    assert first.registry.get("bill").options["version"] == "3"
    newer = Worker(cq, extensions=[Steps(version="2027-01")])
    same = Worker(cq, extensions=[Steps(version="2026-12")])
    for each in (worker, newer, same):
        each.task("ledger.post")(post)
    try:
        task = await cq.submit("ledger.post", {}, max_attempts=1)
        await drain(worker)
        await cq.retry(task.id)
        await drain(newer)                     # another version: not replayed
        changed = await cq.get(task.id)
        assert (changed.status, changed.error["code"]) == ("failed", "steps_changed")
        await cq.retry(task.id)
        await drain(same)                      # the version that recorded them: replayed
        assert (await cq.get(task.id)).status == "succeeded"
    finally:
        await same.close()
        await newer.close()
        await worker.close()
        await first.close()
    """,
)

add(
    "docs/metrics.md",
    "from cairnq.telemetry import Metrics, Tracing",
    """
    import asyncio
    import httpx
    from cairnq.testing import drain

    class App:                                  # a web app: what is mounted where
        def __init__(self):
            self.mounted = {}

        def mount(self, path, asgi):
            self.mounted[path] = asgi

    @worker.task("resize")
    async def resize(ctx, payload):
        return {"width": payload["width"] // 2}

    app, sync_cq = App(), SyncCairnQ.sqlite("cairnq.db")
    await cq.submit("resize", {"width": 640})

    def program():
        #>> block
        return metrics, body

    try:
        metrics, body = await asyncio.to_thread(program)
        assert b'cairnq_tasks{queue="default",status="queued"} 1.0' in body
        await drain(worker)
        transport = httpx.ASGITransport(app=app.mounted["/metrics"])
        async with httpx.AsyncClient(transport=transport, base_url="http://app.test") as http:
            scraped = (await http.get("/")).text
        assert 'cairnq_tasks{queue="default",status="succeeded"} 1.0' in scraped
        assert 'cairnq_tasks_succeeded_total{name="resize",queue="default"} 1.0' in scraped
    finally:
        await asyncio.to_thread(sync_cq.close)
    """,
)

add(
    "docs/http-api.md",
    "from cairnq.dashboard import ApiRequest, ApiRoute, Param, PartsOnly",
    """
    import sys, types
    import httpx
    from cairnq.dashboard import create_app
    from cairnq.testing import drain
    from tests.audit_ext import Audit

    #>> block
    module = types.ModuleType("audit_ext_api_pages")  # the extension's pages module
    module.pages = AuditPages
    sys.modules[module.__name__] = module
    audit = Audit()
    audit.pages = module.__name__
    cq = CairnQ.sqlite("audit.db", extensions=[audit])
    worker = Worker(cq)

    @worker.task("noop")
    async def noop(ctx, payload):
        return None

    try:
        for _ in range(3):
            await cq.submit("noop", {})
        await drain(worker)
        app = create_app(cq, token="t0ken-for-docs", extensions=[audit])
        transport = httpx.ASGITransport(app=app)
        headers = {"authorization": "Bearer t0ken-for-docs"}
        async with httpx.AsyncClient(transport=transport, base_url="http://app.test") as http:
            two = await http.get("/api/audit", params={"limit": 2}, headers=headers)
            wrong = await http.get("/api/audit", params={"limit": 0}, headers=headers)
            document = (await http.get("/api/openapi.json", headers=headers)).json()
        assert two.status_code == 200 and len(two.json()["rows"]) == 2
        assert wrong.status_code == 400
        assert document["paths"]["/audit"]["get"]["operationId"] == "listAudit"
    finally:
        del sys.modules[module.__name__]
        await worker.close()
        await cq.close()
    """,
)

add(
    "docs/django.md",
    "# settings.py",
    """
    from cairnq.contrib.django._settings import Settings, check_entry

    #>> block
    assert INSTALLED_APPS[-1] == "cairnq.contrib.django"
    assert check_entry("default", TASKS["default"]) == Settings(database="default", max_attempts=3)
    """,
    imports=("django",),
)

add(
    "docs/django.md",
    "# asgi.py",
    """
    import asyncio
    import httpx
    from tests import _django

    await asyncio.to_thread(_django.setup)   # a configured project: LOGIN_URL = "/login/"
    #>> block

    def staff_cookie():
        from django.contrib.auth.models import User
        from django.test import Client

        client = Client()
        client.force_login(User.objects.create_user(f"staff-{id(client)}", is_staff=True))
        return f"sessionid={client.cookies['sessionid'].value}"

    cookie = await asyncio.to_thread(staff_cookie)
    transport = httpx.ASGITransport(app=application)
    async with httpx.AsyncClient(transport=transport, base_url="http://app.test") as http:
        visitor = await http.get("/cairnq/")
        staff = await http.get("/cairnq/", headers={"cookie": cookie})
        own = await http.get("/hello")
    location = (visitor.status_code, visitor.headers["location"])
    assert location == (302, "/login/?next=%2Fcairnq%2F")
    assert staff.status_code == 200 and 'href="/cairnq/tasks' in staff.text
    assert own.text == "hello from django"
    """,
    imports=("django",),
)

add(
    "docs/django.md",
    "# myapp/tasks.py",
    """
    import asyncio, contextlib, importlib, io, json, re, secrets, sys
    from pathlib import Path
    from tests import _django

    await asyncio.to_thread(_django.setup)   # the tests' project, on a SQLite database
    if False:  # the block is two modules of an app: it runs from the files written below
        #>> block
    parts = re.split("^# (myapp/[a-z]+[.]py)$", Path("snippet.py").read_text(), flags=re.M)
    for name, text in [("myapp/__init__.py", parts[0]), *zip(parts[1::2], parts[2::2])]:
        Path(name).parent.mkdir(exist_ok=True)
        Path(name).write_text(text)
    sys.path.insert(0, str(Path.cwd()))

    def visit():
        from django.contrib.auth.models import User
        from django.core import mail
        from django.core.management import call_command
        from django.db import transaction
        from django.test import RequestFactory, override_settings
        from cairnq.contrib.django._api import task_backends

        views, web = importlib.import_module("myapp.views"), RequestFactory()
        tag = secrets.token_hex(3)
        ada, mallory = f"ada{tag}", f"mallory{tag}"

        def stored():
            found = task_backends["default"].client().list(name="myapp.tasks.send_welcome")
            return {task.id for task in found}
        def signup(user):
            form = {"username": user, "email": f"{user}@example.com"}
            return json.loads(views.signup(web.post("/signup/", form)).content)
        def status(result_id):
            return json.loads(views.welcome_status(web.get("/"), result_id).content)
        before = stored()
        with override_settings(EMAIL_BACKEND="django.core.mail.backends.locmem.EmailBackend"):
            result_id = signup(ada)["result_id"]
            with contextlib.suppress(LookupError), transaction.atomic():
                signup(mallory)     # in a request whose transaction then rolls back
                raise LookupError("refused after the sign-up")
            assert stored() - before == {result_id}
            assert not User.objects.filter(username=mallory).exists()
            assert status(result_id) == {"status": "READY", "sent": None}
            call_command("cairnq_worker", "--module", "myapp.tasks", "--until-idle",
                         "--poll-interval-ms", "20", stdout=io.StringIO())
            assert status(result_id) == {"status": "SUCCESSFUL", "sent": 1}
            assert [m.to for m in mail.outbox if tag in m.to[0]] == [[f"{ada}@example.com"]]

    try:
        await asyncio.to_thread(visit)
    finally:
        sys.path.remove(str(Path.cwd()))
        for module in [m for m in sys.modules if m.split(".")[0] == "myapp"]:
            del sys.modules[module]
    """,
    imports=("django", "django_tasks"),
)
