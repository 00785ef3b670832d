"""Awaited PostgreSQL operations are held to ``op_timeout``: a silent server becomes
``DatabaseUnavailable``, a cancellation from outside stays a cancellation."""

from __future__ import annotations

import asyncio

import pytest

from cairnq import CairnQ, DatabaseUnavailable
from cairnq.backends.postgres import PostgresBackend

from ._db import Database
from ._pgproxy import PgProxy

pytestmark = pytest.mark.postgres


def _through(proxy: PgProxy, db: Database) -> str:
    from psycopg.conninfo import conninfo_to_dict, make_conninfo

    given = conninfo_to_dict(db.url)
    return make_conninfo(
        host="127.0.0.1",
        port=proxy.port,
        dbname=given["dbname"],
        user=given.get("user"),
        sslmode="disable",
    )


def _backend(proxy: PgProxy, db: Database, op_timeout: float) -> PostgresBackend:
    return PostgresBackend(
        _through(proxy, db),
        schema=db.schema,
        listen=False,
        min_size=1,
        max_size=1,
        op_timeout=op_timeout,
    )


async def test_an_awaited_submit_on_a_silent_connection_fails_after_op_timeout(
    pg_db: Database,
) -> None:
    with PgProxy() as proxy:
        cq = CairnQ(_backend(proxy, pg_db, 0.5))
        try:
            await cq.stats()
            assert proxy.blackhole(listening=False) >= 1
            with pytest.raises(DatabaseUnavailable, match=r"did not answer within 0\.5 s"):
                await cq.submit("job", {})
        finally:
            proxy.heal()
            await cq.close()


async def test_an_awaited_read_on_a_silent_connection_fails_after_op_timeout(
    pg_db: Database,
) -> None:
    with PgProxy() as proxy:
        cq = CairnQ(_backend(proxy, pg_db, 0.5))
        try:
            await cq.stats()
            assert proxy.blackhole(listening=False) >= 1
            with pytest.raises(DatabaseUnavailable, match=r"did not answer within 0\.5 s"):
                await cq.stats()
        finally:
            proxy.heal()
            await cq.close()


async def test_the_pool_serves_again_after_an_awaited_submit_timed_out(pg_db: Database) -> None:
    with PgProxy() as proxy:
        cq = CairnQ(_backend(proxy, pg_db, 0.5))
        try:
            await cq.stats()
            proxy.blackhole(listening=False)
            with pytest.raises(DatabaseUnavailable):
                await cq.submit("job", {"n": 1})
            proxy.heal()
            stored = await cq.submit("job", {"n": 2})
            fetched = await cq.get(stored.id)
        finally:
            proxy.heal()
            await cq.close()
    assert fetched is not None and fetched.payload == {"n": 2}


async def test_an_awaited_submit_cancelled_from_outside_is_cancelled_not_timed_out(
    pg_db: Database,
) -> None:
    with PgProxy() as proxy:
        cq = CairnQ(_backend(proxy, pg_db, 60))
        try:
            await cq.stats()
            proxy.blackhole(listening=False)
            with pytest.raises(asyncio.TimeoutError):
                await asyncio.wait_for(cq.submit("job", {}), 0.3)
        finally:
            proxy.heal()
            await cq.close()
