"""PostgreSQL crashes, killed sessions and broken networks, checked by the history checker."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from cairnq.models import Lease

from .._db import Database, admin_connect
from .._pgproxy import PgProxy
from .harness import Config, Run
from .history import load
from .pgcluster import Cluster

pytestmark = [pytest.mark.chaos, pytest.mark.slow, pytest.mark.postgres]


@pytest.fixture
def cluster(pg_dsn: str) -> Iterator[Cluster]:
    """A private cluster (needs root to act as the postgres system user; CI runs as root)."""
    try:
        with Cluster() as running:
            yield running
    except (OSError, KeyError) as exc:
        pytest.fail(f"cannot run a private PostgreSQL cluster here: {exc}")


def _until(condition: Callable[[], bool], what: str, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, f"never happened: {what}"
        time.sleep(0.01)


def _wait_until_every_client_submitted(folder: Path, clients: int) -> None:
    deadline = time.monotonic() + 60
    while True:
        events = load(sorted(folder.glob("client-*.jsonl")))
        if len({e["pid"] for e in events if e["event"] == "submit_ok"}) >= clients:
            return
        assert time.monotonic() < deadline, "the clients never submitted"
        time.sleep(0.05)


def test_postgres_crashing_and_restarting_under_load_loses_no_accepted_task(
    cluster: Cluster, tmp_path: Path
) -> None:
    db = Database.postgres(cluster.dsn, "chaos")
    config = Config(workers=3, clients=2, tasks_per_client=80, lease_ms=1500, seed=17)
    run = Run(db, tmp_path, config)
    try:
        for _ in range(config.workers):
            run.start_worker()
        run.start_clients()
        # The crashes come once every client has submitted: a client that has not
        # connected yet when the server goes down cannot start at all.
        _wait_until_every_client_submitted(tmp_path, config.clients)
        for _ in range(2):
            time.sleep(1.5)
            cluster.crash()
            run.faults.append("postgres crash")
            time.sleep(2.0)
            cluster.start()
        run.wait_clients(timeout=180)
        run.quiesce()
        alive = run.live_workers()
    finally:
        run.stop()
    report = run.check()
    assert report.valid, report.summary()
    assert len(alive) >= config.workers
    assert report.counters["submitted"] > 0
    db.close_all()


def test_killed_sessions_reconnect_and_work_continues(pg_db: Database, tmp_path: Path) -> None:
    config = Config(workers=2, clients=2, tasks_per_client=60, lease_ms=1500, seed=19)
    run = Run(pg_db, tmp_path, config)
    try:
        for _ in range(config.workers):
            run.start_worker()
        run.start_clients()
        for _ in range(3):
            time.sleep(1.0)
            with admin_connect(pg_db.url) as admin:
                killed = admin.execute(
                    "select pg_terminate_backend(pid) from pg_stat_activity "
                    "where application_name like 'cairnq-%' and datname = current_database() "
                    "and pid <> pg_backend_pid()"
                ).fetchall()
            run.faults.append(f"terminated {len(killed)} sessions")
        run.wait_clients()
        run.quiesce()
        alive = run.live_workers()
    finally:
        run.stop()
    report = run.check()
    assert report.valid, report.summary()
    assert len(alive) == config.workers


def test_cut_connections_between_worker_and_server_lose_nothing(
    pg_db: Database, tmp_path: Path
) -> None:
    from psycopg.conninfo import conninfo_to_dict, make_conninfo

    with PgProxy() as proxy:
        dbname = conninfo_to_dict(pg_db.url)["dbname"]
        through = Database.postgres(
            make_conninfo(host="127.0.0.1", port=proxy.port, dbname=dbname, sslmode="disable"),
            pg_db.schema or "",
        )
        config = Config(workers=0, clients=2, tasks_per_client=60, lease_ms=1500, seed=23)
        run = Run(pg_db, tmp_path, config)
        cuts = 0
        try:
            for _ in range(2):
                run.start_worker(through=through)
            run.start_clients()
            _wait_until_every_client_submitted(tmp_path, config.clients)
            for _ in range(3):
                # Each cut comes once the workers hold connections again (at least one
                # each: a worker keeps its LISTEN connection open), however long the
                # reconnects take.
                _until(lambda: proxy.opened_since_cut() >= 2, "the workers connected")
                cuts += proxy.cut_all()
                run.faults.append("cut")
            run.wait_clients()
            run.quiesce()
        finally:
            run.stop()
        report = run.check()
    assert report.valid, report.summary()
    assert cuts >= 6


def _through(proxy: PgProxy, db: Database) -> Database:
    from psycopg.conninfo import conninfo_to_dict, make_conninfo

    dbname = conninfo_to_dict(db.url)["dbname"]
    dsn = make_conninfo(host="127.0.0.1", port=proxy.port, dbname=dbname, sslmode="disable")
    return Database.postgres(dsn, db.schema or "")


async def test_a_half_open_listen_connection_is_detected_and_replaced(
    pg_db: Database, tmp_path: Path
) -> None:
    import asyncio

    from cairnq import TaskContext, Worker

    from ..test_postgres import _submit_from_another_process

    with PgProxy() as proxy:
        route = _through(proxy, pg_db)
        worker = Worker.postgres(
            route.url, schema=pg_db.schema, poll_interval_ms=120_000, listen_health=1.0
        )
        backend = worker.client.backend

        @worker.task
        async def job(ctx: TaskContext, payload: object) -> str:
            return "woken"

        async with pg_db.client() as cq, worker.background():
            for _ in range(500):
                if backend.listening:  # type: ignore[attr-defined]
                    break
                await asyncio.sleep(0.01)
            await asyncio.sleep(0.3)
            assert proxy.blackhole(listening=True) == 1
            for _ in range(1000):
                if not backend.listening:  # type: ignore[attr-defined]
                    break
                await asyncio.sleep(0.01)
            assert not backend.listening  # type: ignore[attr-defined]
            for _ in range(1000):
                if backend.listening:  # type: ignore[attr-defined]
                    break
                await asyncio.sleep(0.01)
            assert backend.listening  # type: ignore[attr-defined]
            await asyncio.sleep(0.3)
            [task_id] = _submit_from_another_process(pg_db)
            done = await cq.wait(task_id, timeout_ms=10_000)
        await worker.close()
    assert (done.status, done.result) == ("succeeded", "woken")


def test_a_worker_whose_connections_go_silent_loses_its_leases_and_changes_nothing_late(
    pg_db: Database, tmp_path: Path
) -> None:
    with PgProxy() as proxy:
        route = _through(proxy, pg_db)
        config = Config(
            workers=0,
            clients=1,
            tasks_per_client=8,
            mix=(1, 0, 0, 0),
            sleep_ms=(2000, 2100),
            lease_ms=600,
            heartbeat_ms=150,
            seed=29,
            op_timeout_s=2.0,
        )
        run = Run(pg_db, tmp_path, config)
        try:
            run.start_clients()
            run.wait_clients()
            silent = run.start_worker(through=route, concurrency=8)
            deadline = time.monotonic() + 30
            with pg_db.sync_client() as client:
                while client.stats()["default"]["running"] < 8:
                    assert time.monotonic() < deadline
                    time.sleep(0.01)
            time.sleep(0.4)
            assert proxy.blackhole(listening=False) >= 2
            run.start_worker(concurrency=8)
            time.sleep(3 * config.lease_ms / 1000 + 1.0)
            proxy.heal()
            run.quiesce()
            silent_alive = run.workers[silent].poll() is None
        finally:
            run.stop()
        report = run.check()
    assert report.valid, report.summary()
    assert report.counters["recoveries"] >= 1
    assert silent_alive


async def test_racing_transactional_completions_commit_exactly_one_effect(
    pg_db: Database,
) -> None:
    """A stale attempt and the current one both complete inside their own transaction."""
    import asyncio

    from cairnq import LostLease, kernel
    from cairnq.testing import FakeClock

    clock = FakeClock()
    trials = 40
    backend = pg_db.backend(clock=clock, max_size=4)
    outcomes: list[tuple[str, str]] = []
    async with pg_db.client(clock=clock) as setup:
        await setup.stats()
        await backend.aopen()
        with admin_connect(pg_db.url) as admin:
            admin.execute(f'set search_path to "{pg_db.schema}"')
            admin.execute("create table effects (task_id text, attempt int)")
        for _ in range(trials):
            await setup.submit("job", {})
            first = (
                await setup.backend.arun(
                    kernel.claim(["default"], "w1", 1000, [kernel.Draw(None, 1)], 10), write=True
                )
            )[0]
            clock.advance(1001)
            second = (
                await setup.backend.arun(
                    kernel.claim(["default"], "w2", 60_000, [kernel.Draw(None, 1)], 10), write=True
                )
            )[0]

            def writer(task_id: str, attempt: int) -> object:
                async def write(conn: object) -> int:
                    await conn.execute(  # type: ignore[attr-defined]
                        "insert into effects values (%s, %s)", (task_id, attempt)
                    )
                    await asyncio.sleep(0.01)
                    return attempt

                return write

            async def settle(worker: str, row: dict[str, object]) -> str:
                lease = Lease.of(row)  # type: ignore[arg-type]
                try:
                    await backend.arun_around_write(  # type: ignore[attr-defined]
                        kernel.hold(lease, worker),
                        writer(lease.id, lease.attempt),
                        lambda r: kernel.complete_held(lease, worker, str(r)),
                    )
                except LostLease:
                    return "lost"
                return "committed"

            results = await asyncio.gather(settle("w1", first), settle("w2", second))
            outcomes.append((results[0], results[1]))
    await backend.aclose()
    with admin_connect(pg_db.url) as admin:
        admin.execute(f'set search_path to "{pg_db.schema}"')
        rows = admin.execute(
            "select task_id, count(*), min(attempt) from effects group by task_id"
        ).fetchall()
    assert set(outcomes) == {("lost", "committed")}
    assert len(rows) == trials
    assert {(count, attempt) for _, count, attempt in rows} == {(1, 2)}
