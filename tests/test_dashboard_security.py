"""Dashboard hardening: host names, the redirect after a token, cookies beside a host app's."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest

from cairnq import CairnQ
from cairnq.dashboard import create_app

from ._db import Database
from .test_cli import db_args, run

TOKEN = "t0ken-for-tests"
LOOPBACK = ("localhost", "127.0.0.1", "::1")


@pytest.fixture
async def cq(db: Database) -> AsyncIterator[CairnQ]:
    async with db.client() as client:
        yield client


def http(app: Any, base_url: str) -> httpx.AsyncClient:
    return httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url=base_url)


async def test_a_host_name_outside_the_allowed_hosts_is_refused(cq: CairnQ) -> None:
    app = create_app(cq, allowed_hosts=LOOPBACK)
    async with http(app, "http://rebound.attacker.example:8181") as client:
        page = await client.get("/")
    assert page.status_code == 421


async def test_loopback_names_with_any_port_are_served(cq: CairnQ) -> None:
    app = create_app(cq, allowed_hosts=LOOPBACK)
    statuses = []
    for base in ("http://127.0.0.1:8181", "http://localhost:9000", "http://[::1]:8181"):
        async with http(app, base) as client:
            statuses.append((await client.get("/")).status_code)
    assert statuses == [200, 200, 200]


def test_the_command_without_a_token_serves_loopback_names_only(
    db: Database, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    import uvicorn

    db.sync_client().open().stats()
    served: dict[str, Any] = {}
    monkeypatch.setattr(uvicorn, "run", lambda app, **options: served.update(app=app))
    monkeypatch.delenv("CAIRNQ_DASHBOARD_TOKEN", raising=False)
    result = run(capsys, "dashboard", *db_args(db))
    assert result.code == 0, result.err
    assert served["app"].allowed_hosts == frozenset({*LOOPBACK})
    asyncio.run(served["app"].aclose())


@pytest.mark.parametrize(
    "path", ["/%2Fevil.example/x", "/\\evil.example", "/a%0d%0aset-cookie:%20x=1"]
)
async def test_the_redirect_after_a_query_token_stays_on_this_site(cq: CairnQ, path: str) -> None:
    async with http(create_app(cq, token=TOKEN), "http://dash.test") as client:
        response = await client.get(path, params={"token": TOKEN})
    location = response.headers["location"]
    assert response.status_code == 303
    assert location.startswith("/") and not location.startswith(("//", "/\\"))
    assert "\r" not in location and "\n" not in location


async def test_the_session_cookie_is_found_after_a_cookie_simplecookie_rejects(
    cq: CairnQ,
) -> None:
    app = create_app(cq, token=TOKEN)
    async with http(app, "http://dash.test") as client:
        login = await client.get("/", params={"token": TOKEN})
        session = login.cookies["cairnq_dashboard"]
        client.cookies.clear()
        page = await client.get(
            "/", headers={"cookie": f'prefs={{"a":1}}; other=a b; cairnq_dashboard={session}'}
        )
    assert page.status_code == 200
