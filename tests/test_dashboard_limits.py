"""The dashboard's limits page over HTTP: each limit's definition, use now and waiting tasks.

Tasks run under a limit by claiming them through the limited claim a worker uses,
so the page's counts are exact.
"""

from __future__ import annotations

import re
from collections.abc import AsyncIterator

import pytest

from cairnq import CairnQ, Limit, kernel
from cairnq.dashboard import create_app
from cairnq.extensions.limits._claim import ClaimGate

from ._db import Database
from .test_dashboard import http
from .test_without_extensions import protocol_only

WORKER = "worker_dashboard_limits"


@pytest.fixture
async def cq(db: Database) -> AsyncIterator[CairnQ]:
    async with db.client() as client:
        yield client


async def run_limited(cq: CairnQ, *limits: Limit, want: int = 100) -> int:
    """Store ``limits`` and claim up to ``want`` due tasks under them, as a worker would."""
    for limit in limits:
        await cq.limits.set(limit)
    op = kernel.claim(
        ["default"],
        WORKER,
        60_000,
        [kernel.Draw(None, want)],
        100,
        points=kernel.claiming_with(ClaimGate(list(limits))),
    )
    return len(await cq.backend.arun(op, write=True))


def cell(page: str, limit_id: str, name: str) -> str:
    """The text of one cell (``data-use``, ``data-waiting``...) of a limit's row, tags removed."""
    row = re.search(rf'<tr data-limit="{re.escape(limit_id)}">(.*?)</tr>', page, re.S)
    assert row, f"no row for limit {limit_id!r}"
    found = re.search(rf"<td[^>]*\b{name}\b[^>]*>(.*?)</td>", row.group(1), re.S)
    assert found, f"no {name} cell"
    return " ".join(re.sub(r"<[^>]+>", "", found.group(1)).split())


async def limits_page(cq: CairnQ) -> str:
    async with http(create_app(cq)) as client:
        response = await client.get("/limits")
    assert response.status_code == 200
    return response.text


async def test_every_page_links_to_the_limits_page(cq: CairnQ) -> None:
    async with http(create_app(cq)) as client:
        page = (await client.get("/")).text
    assert '<a href="/limits">Limits</a>' in page


async def test_a_limit_per_key_shows_its_definition_busiest_keys_and_waiting_tasks(
    cq: CairnQ,
) -> None:
    for customer, count in (("a", 5), ("b", 1), ("c", 2)):
        await cq.submit_many([("job", {"customer": customer}) for _ in range(count)])
    per_customer = Limit.concurrency(2, queue="default", key="payload.customer", id="per-customer")
    assert await run_limited(cq, per_customer) == 5
    page = await limits_page(cq)
    assert cell(page, "per-customer", "data-rule") == "2 at once"
    assert cell(page, "per-customer", "data-use") == "a 2/2, c 2/2, b 1/2"
    assert cell(page, "per-customer", "data-running") == "5"
    assert cell(page, "per-customer", "data-waiting") == "3"
    row = re.search(r'<tr data-limit="per-customer">(.*?)</tr>', page, re.S)
    assert row is not None
    assert "payload.customer" in row.group(1) and "operator" in row.group(1)
    assert 'href="/tasks?status=queued&amp;queue=default"' in row.group(1)


async def test_only_the_busiest_keys_are_listed_with_a_count_of_the_rest(cq: CairnQ) -> None:
    await cq.submit_many([("job", {"customer": f"c{i}"}) for i in range(8)])
    limit = Limit.concurrency(1, queue="default", key="payload.customer", id="each")
    assert await run_limited(cq, limit) == 8
    use = cell(await limits_page(cq), "each", "data-use")
    assert use == "c0 1/1, c1 1/1, c2 1/1, c3 1/1, c4 1/1 +3 keys"


async def test_a_rate_limit_shows_its_period_burst_and_tokens_left(cq: CairnQ) -> None:
    await cq.submit_many([("job", None) for _ in range(3)])
    assert await run_limited(cq, Limit.rate(1, per="1h", burst=2, name="job", id="slow")) == 2
    page = await limits_page(cq)
    assert cell(page, "slow", "data-rule") == "1 per 1h00m, burst 2"
    assert cell(page, "slow", "data-use") == "tokens 0.0/2"
    assert cell(page, "slow", "data-waiting") == "1"


async def test_without_limits_the_page_says_how_to_add_one(cq: CairnQ) -> None:
    page = await limits_page(cq)
    assert "No limits" in page and "cairnq limits set" in page


async def test_without_the_limits_tables_the_page_says_so_in_one_line(db: Database) -> None:
    protocol_only(db)
    async with db.client(migrate=False) as cq:
        page = await limits_page(cq)
    [line] = re.findall(r"<p class=\"empty\" data-limits-missing>(.*?)</p>", page)
    assert "x0006_limits.sql" in line and "cairnq migrate" in line


async def test_limit_ids_and_keys_are_escaped(cq: CairnQ) -> None:
    await cq.submit("job", {"customer": "<b>x</b>"})
    limit = Limit.concurrency(1, queue="default", key="payload.customer", id="<i>id</i>")
    assert await run_limited(cq, limit) == 1
    page = await limits_page(cq)
    assert "<b>x</b>" not in page and "<i>id</i>" not in page
    assert "&lt;b&gt;x&lt;/b&gt;" in page
