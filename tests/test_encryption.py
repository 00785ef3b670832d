"""Payloads, results, event payloads and step results encrypted at rest (``codec=``,
``cairnq.encryption.Encrypting``), on a real database: what is stored holds no
plaintext, a ring of several keys reads what any of them wrote, and keys appear in
no repr, log line or error.
"""

from __future__ import annotations

import asyncio
import base64
import json
import logging
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from cairnq import CairnQ, InvalidArgument, SerializationError, Worker
from cairnq._json import JsonCodec
from cairnq.encryption import KEYS_ENV, DecryptionError, Encrypting, keys_from_env
from cairnq.extensions import Search
from cairnq.limits import FairShare, Limit, Limits
from cairnq.testing import FakeClock

from ._db import Database, admin_connect

ROOT = Path(__file__).resolve().parents[1]
START = 1_800_000_000_000  # a multiple of 10 s: slots of every="10s" fall on it
MARKER = "PLAINTEXT-MARKER-7f3a"
# Fixed keys: a generated one starts with "-" or "_" one time in 32, and then it is not a
# valid key id either, which changes what the key-as-id case below is refused for.
KEY_1 = base64.urlsafe_b64encode(bytes(range(32))).decode()
KEY_2 = base64.urlsafe_b64encode(bytes(range(32, 64))).decode()


def stored_text(db: Database) -> bytes:
    """Everything the database stores: the SQLite file with its WAL, or every row of every
    table of the PostgreSQL schema as psql would print it."""
    if db.kind == "sqlite":
        assert db.path is not None
        files = sorted(db.path.parent.glob(db.path.name + "*"))
        assert files
        return b"".join(f.read_bytes() for f in files)
    from psycopg import sql

    found = []
    with admin_connect(db.url) as conn:
        tables = conn.execute(
            "select table_name from information_schema.tables where table_schema = %s",
            (db.schema,),
        ).fetchall()
        assert tables
        for (table,) in tables:
            query = sql.SQL("select coalesce(string_agg(t::text, E'\\n'), '') from {}.{} t")
            [[text]] = conn.execute(
                query.format(sql.Identifier(db.schema or ""), sql.Identifier(table))
            ).fetchall()
            found.append(text.encode())
    return b"\n".join(found)


async def _until(probe: Any, timeout_s: float = 20.0) -> Any:
    deadline = asyncio.get_running_loop().time() + timeout_s
    while True:
        value = await probe()
        if value:
            return value
        if asyncio.get_running_loop().time() > deadline:
            raise AssertionError("timed out waiting")
        await asyncio.sleep(0.02)


def _finished(cq: CairnQ, task_id: str) -> Any:
    async def probe() -> Any:
        task = await cq.get(task_id)
        return task if task is not None and task.is_terminal else None

    return probe


# --- across processes, and nothing in the clear ---------------------------------------------


@pytest.mark.slow
def test_a_task_encrypted_by_one_client_runs_in_another_process_with_the_same_ring(
    db: Database,
) -> None:
    ring = Encrypting({"k1": KEY_1})
    with db.sync_client(codec=ring) as cq:
        task = cq.submit("secret.echo", {"ssn": MARKER})
        child = subprocess.run(
            [sys.executable, "-m", "tests._encryption_child", db.spec()],
            cwd=ROOT,
            env={**os.environ, KEYS_ENV: f"k1={KEY_1}"},
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
        assert child.returncode == 0, child.stderr
        done = cq.get(task.id)
    assert done is not None and done.status == "succeeded", done
    assert done.result == {"echo": {"ssn": MARKER}, "pid": json.loads(child.stdout)["pid"]}
    assert done.result["pid"] != os.getpid()
    assert MARKER.encode() not in stored_text(db)


async def test_the_storage_read_finds_a_payload_a_client_without_a_codec_stored(
    db: Database,
) -> None:
    async with db.client() as cq:
        await cq.submit("plain.echo", {"name": MARKER})
    assert MARKER.encode() in stored_text(db)


async def test_payloads_results_event_payloads_and_step_results_are_stored_encrypted(
    db: Database,
) -> None:
    ring = Encrypting({"k1": KEY_1})
    worker = db.worker(poll_interval_ms=20, codec=ring)

    @worker.task("secret.flow")
    async def flow(ctx: Any, payload: Any) -> Any:
        step = await ctx.step("look-up", lambda: f"step {payload['name']}")
        event = await ctx.wait_for("approval")
        return {"step": step, "event": event, "name": payload["name"]}

    async with db.client(codec=ring) as cq, worker.background():
        task = await cq.submit("secret.flow", {"name": f"{MARKER}-payload"})

        async def parked() -> Any:
            waits = await cq.events.waits(task.id)
            return waits and waits[-1].state == "waiting"

        await _until(parked)
        await cq.events.send("approval", {"by": f"{MARKER}-event"})
        done = await _until(_finished(cq, task.id))
        steps = await cq.steps.list(task.id)
    assert done.status == "succeeded", done.error
    assert done.payload == {"name": f"{MARKER}-payload"}
    assert done.result == {
        "step": f"step {MARKER}-payload",
        "event": {"by": f"{MARKER}-event"},
        "name": f"{MARKER}-payload",
    }
    assert [(step.name, step.result) for step in steps] == [("look-up", f"step {MARKER}-payload")]
    assert MARKER.encode() not in stored_text(db)


async def test_a_parent_gathers_its_childrens_encrypted_results_decrypted(db: Database) -> None:
    ring = Encrypting({"k1": KEY_1})
    worker = db.worker(poll_interval_ms=20, codec=ring)

    @worker.task
    async def parent(ctx: Any) -> Any:
        children = [await ctx.spawn("child", {"n": n}) for n in range(3)]
        return await ctx.gather(children)

    @worker.task
    async def child(ctx: Any, payload: Any) -> Any:
        return {"n": payload["n"], "who": MARKER}

    async with db.client(codec=ring) as cq:
        task = await cq.submit("parent")
        await asyncio.wait_for(worker.run(until_idle=True), 120)
        await worker.close()
        done = await cq.get(task.id)
    assert done is not None and done.status == "succeeded", done.error
    assert done.result == [{"n": n, "who": MARKER} for n in range(3)]
    assert MARKER.encode() not in stored_text(db)


async def test_the_stored_payload_is_a_json_object_naming_the_format_and_key(
    db: Database,
) -> None:
    async with db.client(codec=Encrypting({"k1": KEY_1})) as cq, db.client() as plain:
        task = await cq.submit("secret.echo", {"ssn": MARKER})
        stored = await plain.get(task.id)
    assert stored is not None
    assert set(stored.payload) == {"$cairnq_enc", "k", "ct"}
    assert (stored.payload["$cairnq_enc"], stored.payload["k"]) == ("v1", "k1")
    assert MARKER not in json.dumps(stored.payload)


async def test_a_scheduled_payload_is_stored_encrypted_and_reaches_the_handler_decrypted(
    db: Database,
) -> None:
    ring = Encrypting({"k1": KEY_1})
    clock = FakeClock(START + 1)
    worker = db.worker(poll_interval_ms=20, codec=ring, clock=clock)
    seen: list[Any] = []

    @worker.task("secret.tick")
    async def tick(ctx: Any, payload: Any) -> None:
        seen.append(payload)

    async with db.client(codec=ring, clock=clock) as cq:
        await cq.schedules.add("tick", "secret.tick", every="10s", payload={"p": MARKER})
        clock.advance(10_000)
        assert await cq.schedules.run_due() == 1
    await worker.run(until_idle=True)
    await worker.close()
    assert seen == [{"p": MARKER}]
    assert MARKER.encode() not in stored_text(db)


@pytest.mark.postgres
async def test_a_submit_in_the_applications_transaction_is_stored_encrypted_and_returned_plain(
    pg_db: Database,
) -> None:
    import psycopg

    ring = Encrypting({"k1": KEY_1})
    async with pg_db.client(codec=ring) as cq:
        await cq.open()
        conn = await psycopg.AsyncConnection.connect(pg_db.url, autocommit=True)
        try:
            await conn.execute(f'set search_path to "{pg_db.schema}"')
            async with conn.transaction():
                task = await cq.submit("secret.echo", {"name": MARKER}, conn=conn)
        finally:
            await conn.close()
        stored = await cq.get(task.id)
    assert task.payload == {"name": MARKER}
    assert stored is not None and stored.payload == {"name": MARKER}
    assert MARKER.encode() not in stored_text(pg_db)


# --- key rotation ---------------------------------------------------------------------------


async def test_a_ring_decrypts_with_any_of_its_keys_and_encrypts_with_the_current_one(
    db: Database,
) -> None:
    old = Encrypting({"k1": KEY_1})
    rotated = Encrypting({"k2": KEY_2, "k1": KEY_1}, current="k2")
    async with db.client(codec=old) as before, db.client(codec=rotated) as after:
        written_before = await before.submit("secret.echo", {"n": 1})
        written_after = await after.submit("secret.echo", {"n": 2})
        read_old = await after.get(written_before.id)
        async with db.client() as plain:
            raw = await plain.get(written_after.id)
        with pytest.raises(DecryptionError, match="'k2'"):
            await before.get(written_after.id)
    assert read_old is not None and read_old.payload == {"n": 1}
    assert raw is not None and raw.payload["k"] == "k2"


# --- without the key ------------------------------------------------------------------------


async def test_a_worker_without_the_key_fails_the_task_naming_the_key_id(db: Database) -> None:
    worker = db.worker(poll_interval_ms=20)
    ran: list[Any] = []

    @worker.task("secret.echo")
    async def echo(ctx: Any, payload: Any) -> None:
        ran.append(payload)

    async with db.client(codec=Encrypting({"k1": KEY_1})) as cq:
        task = await cq.submit("secret.echo", {"ssn": MARKER})
        await worker.run(until_idle=True)
        await worker.close()
        done = await cq.get(task.id)
    assert ran == []
    assert done is not None and done.status == "failed"
    assert done.error is not None and done.error["code"] == "encrypted_payload"
    assert "'k1'" in done.error["message"]


async def test_a_client_without_the_key_reads_the_stored_object_and_the_cli_says_encrypted(
    db: Database, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    from .test_cli import run_on

    async with db.client(codec=Encrypting({"k1": KEY_1})) as cq:
        task = await cq.submit("secret.echo", {"ssn": MARKER})
    monkeypatch.delenv(KEYS_ENV, raising=False)
    hidden = await asyncio.to_thread(run_on, db, capsys, "get", task.id)
    assert hidden.code == 0, hidden.err
    assert json.loads(hidden.out)["payload"] == "<encrypted, v1, key 'k1'>"
    monkeypatch.setenv(KEYS_ENV, f"k1={KEY_1}")
    shown = await asyncio.to_thread(run_on, db, capsys, "get", task.id)
    assert json.loads(shown.out)["payload"] == {"ssn": MARKER}


async def test_the_dashboard_shows_a_payload_as_encrypted_without_the_key_and_decrypts_with_it(
    db: Database,
) -> None:
    import httpx

    from cairnq.dashboard import create_app

    async def page(client: CairnQ, task_id: str) -> str:
        transport = httpx.ASGITransport(app=create_app(client))
        async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1") as http:
            response = await http.get(f"/task?id={task_id}")
        assert response.status_code == 200
        return response.text

    async with db.client(codec=Encrypting({"k1": KEY_1})) as cq, db.client() as plain:
        task = await cq.submit("secret.echo", {"name": MARKER})
        hidden = await page(plain, task.id)
        shown = await page(cq, task.id)
    assert MARKER not in hidden and "encrypted, v1, key" in hidden
    assert MARKER in shown


# --- keys stay secret -----------------------------------------------------------------------


async def test_a_key_appears_in_no_repr_log_line_or_error(
    db: Database, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    ring = Encrypting({"k2": KEY_2, "k1": KEY_1}, current="k2")
    other = Encrypting({"k1": Encrypting.generate_key()})
    worker = db.worker(poll_interval_ms=20, codec=other)

    @worker.task("secret.echo")
    async def echo(ctx: Any, payload: Any) -> None:
        return None

    async with db.client(codec=ring) as cq:
        task = await cq.submit("secret.echo", {"ssn": MARKER})
        await worker.run(until_idle=True)
        await worker.close()
        done = await cq.get(task.id)
        with pytest.raises(DecryptionError) as wrong_key:
            await CairnQ(cq.backend, codec=other).get(task.id)
    with pytest.raises(InvalidArgument) as bad_current:
        Encrypting({"k1": KEY_1}, current="k9")
    with pytest.raises(TypeError) as pickled:
        __import__("pickle").dumps(ring)
    assert done is not None and done.status == "failed"
    texts = [
        repr(ring),
        str(ring),
        repr(cq.codec),
        json.dumps(done.error),
        str(wrong_key.value),
        str(bad_current.value),
        str(pickled.value),
        caplog.text,
    ]
    for key in (KEY_1, KEY_2):
        for text in texts:
            assert key not in text
            assert key[:20] not in text
    assert "k2" in repr(ring)


# --- options --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("keys", "current", "message"),
    [
        ([("k1", KEY_1)], None, "must be a dict"),
        ({}, None, "at least one key"),
        ({"bad id!": KEY_1}, None, "a key id must be"),
        ({"": KEY_1}, None, "a key id must be"),
        ({"k1": 42}, None, "must be a str or bytes"),
        ({"k1": "not-a-fernet-key"}, None, "is not a Fernet key"),
        ({"k1": KEY_1, "k2": KEY_2}, None, "current= must name"),
        ({"k1": KEY_1}, "k2", "is not one of the key ids"),
        ({"k1": KEY_1}, 1, "is not one of the key ids"),
        ({KEY_1: "k1"}, None, "were the id and the key swapped"),
        ({KEY_1.rstrip("="): "k1"}, None, "is not a Fernet key"),
        ({"k1": KEY_1}, KEY_1, "is not one of the key ids"),
    ],
    ids=[
        "list",
        "empty",
        "bad-id",
        "empty-id",
        "key-not-text",
        "not-fernet",
        "no-current",
        "unknown-current",
        "current-not-text",
        "swapped",
        "key-as-id",
        "key-as-current",
    ],
)
def test_a_bad_key_ring_is_refused_naming_ids_only(keys: Any, current: Any, message: str) -> None:
    with pytest.raises(InvalidArgument, match=message) as refused:
        Encrypting(keys, current=current)
    assert "not-a-fernet-key" not in str(refused.value)
    assert KEY_1.rstrip("=")[:8] not in str(refused.value)


async def test_a_client_codec_without_encode_and_decode_is_refused_and_writes_nothing(
    db: Database,
) -> None:
    with pytest.raises(InvalidArgument, match="codec= must have encode"):
        CairnQ(db.backend(), codec="secret")
    async with db.client() as cq:
        assert await cq.list() == []


async def test_a_worker_codec_without_encode_and_decode_is_refused(db: Database) -> None:
    async with db.client() as cq:
        with pytest.raises(InvalidArgument, match="codec= must have encode"):
            Worker(cq, codec=object())
        assert cq.codec.sealer is None


async def test_a_worker_codec_other_than_its_clients_is_refused(db: Database) -> None:
    mine = Encrypting({"k1": KEY_1})
    async with db.client(codec=mine) as cq:
        with pytest.raises(InvalidArgument, match="not the codec its client was built with"):
            Worker(cq, codec=Encrypting({"k2": KEY_2}))
        assert cq.codec.sealer is mine


async def test_a_worker_codec_is_given_to_its_client(db: Database) -> None:
    ring = Encrypting({"k1": KEY_1})
    async with db.client() as cq, db.client() as plain:
        Worker(cq, codec=ring)
        task = await cq.submit("secret.echo", {"ssn": MARKER})
        stored = await plain.get(task.id)
    assert cq.codec.sealer is ring
    assert stored is not None and stored.payload["k"] == "k1"


async def test_a_limit_keyed_by_a_payload_path_is_refused_on_an_encrypting_client(
    db: Database,
) -> None:
    async with db.client(codec=Encrypting({"k1": KEY_1})) as cq:
        with pytest.raises(InvalidArgument, match="payload path read in SQL"):
            await cq.limits.set(Limit.concurrency(1, queue="default", key="payload.customer"))
        await cq.limits.set(Limit.concurrency(1, queue="default", key="metadata.customer"))
        assert [limit.key for limit in await cq.limits.list()] == ["metadata.customer"]


async def test_a_worker_declaring_a_payload_keyed_limit_with_a_codec_is_refused_at_run(
    db: Database,
) -> None:
    worker = db.worker(
        codec=Encrypting({"k1": KEY_1}),
        extensions=[Limits([Limit.concurrency(1, queue="default", key="payload.customer")])],
    )
    with pytest.raises(InvalidArgument, match="payload path read in SQL"):
        await worker.run(until_idle=True)
    await worker.close()
    async with db.client() as cq:
        assert await cq.limits.list() == []


async def test_a_worker_sharing_a_queue_by_a_payload_path_with_a_codec_is_refused_at_run(
    db: Database,
) -> None:
    worker = db.worker(
        codec=Encrypting({"k1": KEY_1}),
        extensions=[Limits(fair=[FairShare(queue="default", key="payload.tenant")])],
    )
    with pytest.raises(InvalidArgument, match="fair share of queue 'default'"):
        await worker.run(until_idle=True)
    await worker.close()


async def test_a_search_field_on_a_payload_path_is_refused_on_an_encrypting_client(
    db: Database,
) -> None:
    fields = Search(fields={"card": "payload.card", "customer": "metadata.customer"})
    async with db.client(codec=Encrypting({"k1": KEY_1}), extensions=[fields]) as cq:
        with pytest.raises(InvalidArgument, match="search field 'card'"):
            await cq.submit("pay", {"card": "4111-1111-1111-1111"}, metadata={"customer": "a"})
        assert await cq.list() == []


def test_keys_from_env_reads_id_key_pairs_the_first_current(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv(KEYS_ENV, f"k2={KEY_2}, k1={KEY_1}")
    ring = keys_from_env()
    assert ring is not None and (ring.current, ring.key_ids) == ("k2", ("k2", "k1"))
    monkeypatch.setenv(KEYS_ENV, "k1")
    with pytest.raises(InvalidArgument, match="entry 1 is not id=key"):
        keys_from_env()
    monkeypatch.delenv(KEYS_ENV)
    assert keys_from_env() is None


def test_a_codec_whose_encode_returns_no_marked_object_is_refused() -> None:
    class Plain:
        def encode(self, text: str) -> Any:
            return text

        def decode(self, stored: Any) -> str:
            return json.dumps(stored)

    with pytest.raises(SerializationError, match="must return a dict holding"):
        JsonCodec(sealer=Plain()).seal({"a": 1}, what="payload")


# --- the extra is optional ------------------------------------------------------------------


def test_without_cryptography_the_error_names_the_encrypt_extra(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setitem(sys.modules, "cryptography", None)
    with pytest.raises(ImportError, match=r'"encrypt" extra'):
        Encrypting({"k1": KEY_1})


def test_a_client_without_a_codec_imports_no_cryptography(tmp_path: Path) -> None:
    program = (
        "import sys, cairnq, cairnq.encryption\n"
        f"cq = cairnq.SyncCairnQ.sqlite({str(tmp_path / 't.db')!r})\n"
        "cq.submit('a', {'x': 1}); cq.close()\n"
        "print('cryptography' in sys.modules)\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", program], capture_output=True, text=True, check=True, timeout=60
    )
    assert out.stdout.strip() == "False"
