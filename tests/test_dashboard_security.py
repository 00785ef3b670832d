"""Dashboard hardening: host names, the redirect after a token, cookies beside a host app's,
malformed queries and forms, and forwarded headers from proxies."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest

from cairnq import CairnQ, InvalidArgument
from cairnq.dashboard import create_app, mount

from ._db import Database
from ._statements import reads_proven_elsewhere, sent_anywhere, sent_statements, silent_refusal
from .test_cli import db_args, one_error_line, run

TOKEN = "t0ken-for-tests"
LOOPBACK = ("localhost", "127.0.0.1", "::1")


@pytest.fixture
async def cq(db: Database) -> AsyncIterator[CairnQ]:
    async with db.client() as client:
        yield client


def http(app: Any, base_url: str) -> httpx.AsyncClient:
    return httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url=base_url)


@silent_refusal
async def test_a_host_name_outside_the_allowed_hosts_is_refused(db: Database, cq: CairnQ) -> None:
    app = create_app(cq, allowed_hosts=LOOPBACK)
    async with http(app, "http://rebound.attacker.example:8181") as client:
        with sent_statements(db) as sent:
            page = await client.get("/")
    assert page.status_code == 421
    assert sent == []


# The overview's reads: test_dashboard.py::test_the_overview_shows_each_queues_counts.
@reads_proven_elsewhere
async def test_loopback_names_with_any_port_are_served(cq: CairnQ) -> None:
    app = create_app(cq, allowed_hosts=LOOPBACK)
    statuses = []
    for base in ("http://127.0.0.1:8181", "http://localhost:9000", "http://[::1]:8181"):
        async with http(app, base) as client:
            statuses.append((await client.get("/")).status_code)
    assert statuses == [200, 200, 200]


# The command's opening of the database:
# test_dashboard.py::test_the_command_serves_with_the_token_from_the_environment.
@reads_proven_elsewhere
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


@silent_refusal
@pytest.mark.parametrize(
    "path", ["/%2Fevil.example/x", "/\\evil.example", "/a%0d%0aset-cookie:%20x=1"]
)
async def test_the_redirect_after_a_query_token_stays_on_this_site(
    db: Database, cq: CairnQ, path: str
) -> None:
    async with http(create_app(cq, token=TOKEN), "http://dash.test") as client:
        with sent_statements(db) as sent:
            response = await client.get(path, params={"token": TOKEN})
    assert sent == []
    location = response.headers["location"]
    assert response.status_code == 303
    assert location.startswith("/") and not location.startswith(("//", "/\\"))
    assert "\r" not in location and "\n" not in location


# The overview's reads: test_dashboard.py::test_the_overview_shows_each_queues_counts.
@reads_proven_elsewhere
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


SECURITY_HEADERS = {
    "x-content-type-options": "nosniff",
    "referrer-policy": "same-origin",
    "x-frame-options": "DENY",
}


@pytest.mark.parametrize(
    ("method", "path", "headers", "status"),
    [
        ("GET", "/", {"Authorization": f"Bearer {TOKEN}"}, 200),
        ("GET", "/static/dashboard.css", {"Authorization": f"Bearer {TOKEN}"}, 200),
        ("GET", "/static/dashboard.css", {}, 401),
        ("GET", "/static/x/workflows/workflows.css", {"Authorization": f"Bearer {TOKEN}"}, 200),
        ("GET", "/static/x/workflows/workflows.css", {}, 401),
        ("GET", "/tasks", {"Authorization": f"Bearer {TOKEN}", "Host": "other.example"}, 421),
        ("DELETE", "/tasks", {"Authorization": f"Bearer {TOKEN}"}, 405),
        ("GET", "/no-such-page", {"Authorization": f"Bearer {TOKEN}"}, 404),
        ("GET", f"/tasks?{'&'.join(f'f{i}=1' for i in range(40))}", {}, 401),
    ],
    ids=[
        "page",
        "static",
        "static-no-token",
        "extension-static",
        "extension-static-no-token",
        "wrong-host",
        "method",
        "not-found",
        "bad-query",
    ],
)
# Only the page reads the database: the overview's reads,
# test_dashboard.py::test_the_overview_shows_each_queues_counts.
@reads_proven_elsewhere
async def test_every_answer_carries_the_security_headers(
    db: Database, cq: CairnQ, method: str, path: str, headers: dict[str, str], status: int
) -> None:
    app = create_app(cq, token=TOKEN, allowed_hosts=["dash.test"])
    async with http(app, "http://dash.test") as client:
        with sent_statements(db) as sent:
            response = await client.request(method, path, headers=headers)
    assert response.status_code == status
    assert (sent != []) is (path == "/")
    assert {k: response.headers.get(k) for k in SECURITY_HEADERS} == SECURITY_HEADERS
    assert "frame-ancestors 'none'" in response.headers["content-security-policy"]


@silent_refusal
async def test_a_method_other_than_get_head_and_post_is_refused_before_the_token_check(
    db: Database, cq: CairnQ
) -> None:
    async with http(create_app(cq, token=TOKEN), "http://dash.test") as client:
        with sent_statements(db) as sent:
            response = await client.request("PUT", "/tasks")
    assert sent == []
    assert response.status_code == 405
    assert response.headers["allow"] == "GET, POST"


# The workers page's reads:
# test_dashboard.py::test_the_workers_page_lists_lease_holders_and_their_tasks.
@reads_proven_elsewhere
async def test_a_head_request_gets_the_headers_and_no_body(cq: CairnQ) -> None:
    async with http(create_app(cq), "http://dash.test") as client:
        head = await client.head("/workers")
        get = await client.get("/workers")
    assert (head.status_code, head.content) == (200, b"")
    assert head.headers["content-type"] == get.headers["content-type"]


@silent_refusal
async def test_a_post_to_a_page_that_is_no_action_is_not_found_and_changes_nothing(
    db: Database, cq: CairnQ
) -> None:
    task = await cq.submit("a")
    app = create_app(cq)
    async with http(app, "http://dash.test") as client:
        with sent_statements(db) as sent:
            response = await client.post(
                "/tasks", params={"id": task.id}, data={"csrf": app.csrf_token()}
            )
    assert sent == []
    assert response.status_code == 404
    assert (await cq.get_status(task.id)).status == "queued"  # type: ignore[union-attr]


# The workers page's reads:
# test_dashboard.py::test_the_workers_page_lists_lease_holders_and_their_tasks.
@reads_proven_elsewhere
async def test_a_page_with_a_trailing_slash_is_the_same_page(cq: CairnQ) -> None:
    async with http(create_app(cq), "http://dash.test") as client:
        plain = await client.get("/workers")
        slashed = await client.get("/workers/")
    assert (plain.status_code, slashed.status_code) == (200, 200)
    assert "aria-current=page>Workers</a>" in slashed.text


# --- malformed and oversized requests --------------------------------------------------------

MANY_FIELDS = "&".join(f"f{i}=1" for i in range(100))
MALFORMED_QUERIES = [
    pytest.param(MANY_FIELDS, 400, id="too-many-fields"),
    pytest.param("key=" + "k" * 3000, 400, id="over-long-value"),
    pytest.param("name=%ff%fe%fd", 400, id="not-utf-8"),
    pytest.param("status=queued&status=failed", 400, id="repeated-field"),
    pytest.param("key=" + "%41" * 6000, 414, id="over-long-query"),
]


def assert_no_internals(response: httpx.Response, caplog: pytest.LogCaptureFixture) -> None:
    """A plain answer: no traceback, exception class or source path, and none logged."""
    for leak in ("Traceback", "Error", ".py", "max_num_fields"):
        assert leak not in response.text
    assert [r for r in caplog.records if r.exc_info] == []


@silent_refusal
@pytest.mark.parametrize(("query", "status"), MALFORMED_QUERIES)
async def test_a_malformed_query_is_a_plain_4xx_without_a_traceback(
    db: Database, cq: CairnQ, caplog: pytest.LogCaptureFixture, query: str, status: int
) -> None:
    async with http(create_app(cq), "http://dash.test") as client:
        with sent_statements(db) as sent:
            response = await client.get(f"/tasks?{query}")
    assert sent == []
    assert response.status_code == status
    assert response.text.startswith("bad request: ")
    assert_no_internals(response, caplog)


@silent_refusal
async def test_the_answer_to_too_many_query_fields_names_the_limit(
    db: Database, cq: CairnQ
) -> None:
    async with http(create_app(cq), "http://dash.test") as client:
        with sent_statements(db) as sent:
            response = await client.get(f"/tasks?{MANY_FIELDS}")
    assert sent == []
    assert response.text == "bad request: the query string has 100 fields, over the limit of 32\n"


@silent_refusal
@pytest.mark.parametrize(("query", "status"), MALFORMED_QUERIES)
@pytest.mark.parametrize(
    "auth",
    [{}, {"Authorization": "Bearer wrong-token"}],
    ids=["no-token", "wrong-token"],
)
async def test_a_malformed_query_without_the_token_is_refused_as_unauthenticated(
    db: Database,
    cq: CairnQ,
    caplog: pytest.LogCaptureFixture,
    query: str,
    status: int,
    auth: dict[str, str],
) -> None:
    async with http(create_app(cq, token=TOKEN), "http://dash.test") as client:
        with sent_statements(db) as sent:
            response = await client.get(f"/tasks?{query}&token=wrong-token", headers=auth)
    assert sent == []
    assert response.status_code == 401
    assert response.headers["www-authenticate"] == "Bearer"
    assert_no_internals(response, caplog)


@silent_refusal
@pytest.mark.parametrize(("query", "status"), MALFORMED_QUERIES)
async def test_a_malformed_query_with_the_token_is_a_plain_4xx(
    db: Database, cq: CairnQ, caplog: pytest.LogCaptureFixture, query: str, status: int
) -> None:
    app = create_app(cq, token=TOKEN)
    async with http(app, "http://dash.test") as client:
        with sent_statements(db) as sent:
            response = await client.get(
                f"/tasks?{query}", headers={"Authorization": f"Bearer {TOKEN}"}
            )
    assert sent == []
    assert response.status_code == status
    assert_no_internals(response, caplog)


@silent_refusal
async def test_a_form_of_too_many_fields_is_a_400_and_changes_nothing(
    db: Database, cq: CairnQ, caplog: pytest.LogCaptureFixture
) -> None:
    task = await cq.submit("a")
    app = create_app(cq)
    form = {f"f{i}": "1" for i in range(100)} | {"csrf": app.csrf_token()}
    async with http(app, "http://dash.test") as client:
        with sent_statements(db) as sent:
            response = await client.post(f"/task/cancel?id={task.id}", data=form)
    assert sent == []
    assert response.status_code == 400
    assert_no_internals(response, caplog)
    assert (await cq.get_status(task.id)).status == "queued"  # type: ignore[union-attr]


@silent_refusal
async def test_a_malformed_form_without_the_token_is_refused_as_unauthenticated(
    db: Database, cq: CairnQ, caplog: pytest.LogCaptureFixture
) -> None:
    form = {f"f{i}": "1" for i in range(100)}
    async with http(create_app(cq, token=TOKEN), "http://dash.test") as client:
        with sent_statements(db) as sent:
            response = await client.post("/purge", data=form)
    assert sent == []
    assert response.status_code == 401
    assert_no_internals(response, caplog)


@silent_refusal
async def test_an_oversized_body_is_refused_only_after_the_token_check(
    db: Database, cq: CairnQ
) -> None:
    body = b"x=" + b"y" * (70 * 1024)
    headers = {"content-type": "application/x-www-form-urlencoded"}
    async with http(create_app(cq, token=TOKEN), "http://dash.test") as client:
        with sent_statements(db) as sent:
            anonymous = await client.post("/purge", content=body, headers=headers)
            signed_in = await client.post(
                "/purge", content=body, headers=headers | {"Authorization": f"Bearer {TOKEN}"}
            )
    assert sent == []
    assert (anonymous.status_code, signed_in.status_code) == (401, 413)


async def test_a_query_at_the_limits_is_still_served(cq: CairnQ) -> None:
    fields = "&".join(f"f{i}=" for i in range(31))
    async with http(create_app(cq), "http://dash.test") as client:
        response = await client.get(f"/tasks?{fields}&queue=" + "%C3%A9" * 500)
    assert response.status_code == 200


# --- odd paths and methods, alone and mounted ------------------------------------------------

ODD_REQUESTS = [
    ("GET", "/static/missing.css", 404),
    ("GET", "/static/%2e%2e/_app.py", 404),
    ("GET", "/static//etc/passwd", 404),
    ("GET", "/static/x/workflows/%2e%2e/_ops.py", 404),
    ("GET", "/static/x/workflows/../__init__.py", 404),
    ("GET", "/static/x/nothing/workflows.css", 404),
    ("POST", "/static/x/workflows/workflows.css", 405),
    ("GET", "/static/" + "a" * 300, 404),
    ("HEAD", "/static/missing.css", 404),
    ("POST", "/static/dashboard.css", 405),
    ("GET", "/static", 404),
    ("GET", "/no-such-page", 404),
    ("PUT", "/tasks", 405),
    ("DELETE", "/static/dashboard.css", 405),
    ("GET", "/tasks?status=queued&status=failed", 400),
]
HOSTS = ["alone", "starlette", "fastapi", "django"]


async def hosted(kind: str, dashboard: Any) -> tuple[Any, str]:
    """The dashboard served alone or mounted under ``/ops`` of a host app; the app and prefix."""
    if kind == "alone":
        return dashboard, ""
    if kind == "starlette":
        from starlette.applications import Starlette
        from starlette.routing import Mount

        return Starlette(routes=[Mount("/ops", app=dashboard)]), "/ops"
    if kind == "fastapi":
        fastapi = pytest.importorskip("fastapi")
        host = fastapi.FastAPI()
        host.mount("/ops", dashboard)
        return host, "/ops"
    from . import _django

    await asyncio.to_thread(_django.setup)  # it migrates: not on the event loop
    from django.core.asgi import get_asgi_application

    return mount("/ops", dashboard, get_asgi_application()), "/ops"


async def odd_answers(
    kind: str, db: Database, cq: CairnQ, headers: dict[str, str]
) -> list[tuple[str, str, int, bool, str]]:
    """Each odd request's method, path, status, whether the dashboard's headers came with
    it, and its text; an exception escaping the app answers 500. None may reach ``db``."""
    app, prefix = await hosted(kind, create_app(cq, token=TOKEN))
    transport = httpx.ASGITransport(app=app, raise_app_exceptions=False)
    answers = []
    async with httpx.AsyncClient(transport=transport, base_url="http://app.test") as client:
        for method, path, _ in ODD_REQUESTS:
            with sent_statements(db) as sent:
                response = await client.request(method, prefix + path, headers=headers)
            assert sent == [], (method, path)
            guarded = all(response.headers.get(k) == v for k, v in SECURITY_HEADERS.items())
            answers.append((method, path, response.status_code, guarded, response.text))
    return answers


@silent_refusal
@pytest.mark.parametrize("kind", HOSTS)
async def test_an_odd_path_or_method_is_a_plain_4xx_alone_and_mounted(
    db: Database, cq: CairnQ, caplog: pytest.LogCaptureFixture, kind: str
) -> None:
    answers = await odd_answers(kind, db, cq, {"Authorization": f"Bearer {TOKEN}"})
    assert [a[:4] for a in answers] == [(m, p, status, True) for m, p, status in ODD_REQUESTS]
    for *_, text in answers:
        for leak in ("Traceback", "Error", "_app.py", "passwd", "detail"):
            assert leak not in text
    assert [r for r in caplog.records if r.exc_info] == []


@silent_refusal
@pytest.mark.parametrize("kind", HOSTS)
async def test_an_odd_path_without_the_token_is_refused_as_unauthenticated(
    db: Database, cq: CairnQ, kind: str
) -> None:
    answers = await odd_answers(kind, db, cq, {})
    # Only a method the dashboard never serves is refused before the token check.
    expected = [(m, p, 405 if m in ("PUT", "DELETE") else 401, True) for m, p, _ in ODD_REQUESTS]
    assert [a[:4] for a in answers] == expected


# --- forwarded headers -----------------------------------------------------------------------

FORGED = {"Origin": "https://evil.example", "X-Forwarded-Host": "evil.example"}


async def post_cancel(
    app: Any, db: Database, cq: CairnQ, headers: dict[str, str]
) -> tuple[int, str, bool]:
    """POST a cancel with a valid CSRF token; the status code, the task's status after,
    and whether the request reached ``db``."""
    task = await cq.submit("a")
    async with http(app, "http://dash.test") as client:
        with sent_statements(db) as sent:
            response = await client.post(
                f"/task/cancel?id={task.id}", data={"csrf": app.csrf_token()}, headers=headers
            )
    after = await cq.get_status(task.id)
    assert after is not None
    return response.status_code, after.status, sent != []


@silent_refusal
async def test_a_forged_forwarded_host_matching_the_origin_is_refused_by_default(
    db: Database, cq: CairnQ
) -> None:
    assert await post_cancel(create_app(cq), db, cq, FORGED) == (403, "queued", False)


# The cancel's statements:
# test_dashboard.py::test_cancel_goes_through_a_confirmation_then_cancels.
@reads_proven_elsewhere
@pytest.mark.parametrize("allow", ["127.0.0.1", ["10.0.0.1", "127.0.0.0/8"], "*"])
async def test_a_forwarded_host_from_a_proxy_in_forwarded_allow_ips_passes_the_origin_check(
    db: Database, cq: CairnQ, allow: Any
) -> None:
    # httpx's ASGI transport reports the peer as 127.0.0.1.
    app = create_app(cq, forwarded_allow_ips=allow)
    assert await post_cancel(app, db, cq, FORGED) == (303, "canceled", True)


@silent_refusal
async def test_a_forwarded_host_from_a_peer_outside_forwarded_allow_ips_is_ignored(
    db: Database, cq: CairnQ
) -> None:
    app = create_app(cq, forwarded_allow_ips="10.0.0.0/8")
    assert await post_cancel(app, db, cq, FORGED) == (403, "queued", False)


@silent_refusal
@pytest.mark.parametrize(("allow", "secure"), [(None, False), ("127.0.0.1", True)])
async def test_forwarded_proto_decides_the_secure_cookie_only_from_a_trusted_proxy(
    db: Database, cq: CairnQ, allow: str | None, secure: bool
) -> None:
    app = create_app(cq, token=TOKEN, forwarded_allow_ips=allow)
    async with http(app, "http://dash.test") as client:
        with sent_statements(db) as sent:
            response = await client.get(
                "/", params={"token": TOKEN}, headers={"X-Forwarded-Proto": "https"}
            )
    assert sent == []
    assert ("; Secure" in response.headers["set-cookie"]) is secure


@pytest.mark.parametrize("allow", ["proxy.example", "10.0.0.1,", "", []])
def test_a_forwarded_allow_ips_entry_that_is_no_address_is_refused(allow: Any) -> None:
    with pytest.raises(InvalidArgument, match="forwarded_allow_ips"):
        create_app("sqlite:///unused.db", forwarded_allow_ips=allow)


# The command's opening of the database:
# test_dashboard.py::test_the_command_serves_with_the_token_from_the_environment.
@reads_proven_elsewhere
def test_the_command_believes_forwarded_headers_only_from_forwarded_allow_ips(
    db: Database, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    import uvicorn

    db.sync_client().open().stats()
    served: list[dict[str, Any]] = []
    monkeypatch.setattr(
        uvicorn, "run", lambda app, **options: served.append(options | {"app": app})
    )
    monkeypatch.delenv("CAIRNQ_DASHBOARD_TOKEN", raising=False)
    plain = run(capsys, "dashboard", *db_args(db))
    proxied = run(
        capsys, "dashboard", "--forwarded-allow-ips", "10.0.0.1,10.1.0.0/16", *db_args(db)
    )
    assert (plain.code, proxied.code) == (0, 0), plain.err + proxied.err
    assert served[0]["app"].forwarded_allow_ips is None
    assert served[1]["app"].forwarded_allow_ips.trusts({"client": ("10.1.2.3", 5)})
    assert not served[1]["app"].forwarded_allow_ips.trusts({"client": ("127.0.0.1", 5)})
    # uvicorn's own handling would believe 127.0.0.1 and rewrite the peer address.
    assert [options["proxy_headers"] for options in served] == [False, False]
    for options in served:
        asyncio.run(options["app"].aclose())


@silent_refusal
def test_the_command_refuses_a_forwarded_allow_ips_entry_that_is_no_address(
    db: Database, capsys: pytest.CaptureFixture[str]
) -> None:
    with sent_anywhere(db) as sent:
        result = run(capsys, "dashboard", "--forwarded-allow-ips", "proxy.example", *db_args(db))
    assert sent == []
    assert result.code == 1
    assert "forwarded_allow_ips entry 'proxy.example'" in one_error_line(result)
