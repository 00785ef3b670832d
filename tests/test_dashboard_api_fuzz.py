"""schemathesis against the HTTP API's own OpenAPI document: every operation, with
inputs the document allows and inputs it forbids, answered without a server error.

The dashboard is served by uvicorn in a thread (its client opens on that thread's
event loop) over a database holding a task of each status (tagged, one run by a
worker that logged and failed once), a schedule, a limit, a pause and a batch. The
bearer token goes with every request, so the actions run too (a request without it
is refused before any route: the security tests).
"""

from __future__ import annotations

import asyncio
import time
from collections import Counter
from collections.abc import Iterator
from typing import Any

import pytest

from cairnq.dashboard import create_app
from cairnq.limits import Limit

from ._db import Database
from .test_dashboard_browser import serve

schemathesis = pytest.importorskip("schemathesis")

from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis.errors import Unsatisfiable  # noqa: E402
from schemathesis import GenerationMode  # noqa: E402
from schemathesis.checks import not_a_server_error  # noqa: E402

# About 390 requests: under a minute on an idle machine, several on a loaded one.
pytestmark = [pytest.mark.slow, pytest.mark.timeout(480)]

TOKEN = "t0ken-for-fuzzing"
AUTH = {"Authorization": f"Bearer {TOKEN}"}
# Per operation and generation mode; about 390 requests over the whole API.
EXAMPLES = 9


async def _run_logged(db: Database) -> None:
    """A task whose handler logs, fails its first attempt and succeeds its second: rows
    for the attempts, logs and trends reads."""
    worker = db.worker(poll_interval_ms=20, retry_backoff_ms=0, queues=["fuzz"])

    @worker.task
    async def logged(ctx: Any) -> Any:
        ctx.log(f"attempt {ctx.attempt}")
        if ctx.attempt == 1:
            raise RuntimeError("first attempt fails")

    async with db.client() as cq:
        await cq.submit("logged", queue="fuzz", max_attempts=2, tags=["fuzz"])
    await worker.run(until_idle=True)


def seed(db: Database) -> None:
    """A task in each status the actions apply to, and a row for each extension's read."""
    asyncio.run(_run_logged(db))
    cq = db.sync_client().open()
    try:
        for index in range(5):
            task = cq.submit("fuzzed", {"i": index}, queue="fuzz", tags=["fuzz", f"i{index}"])
            if index % 2:
                cq.cancel(task.id)
        cq.schedules.add("nightly", "fuzzed", every="1h")
        cq.limits.set(Limit.concurrency(2, queue="fuzz"))
        cq.pauses.pause_queue("paused-queue")
        cq.batches.submit([("fuzzed", {})])
    finally:
        cq.close()


@pytest.fixture
def base_url(db: Database) -> Iterator[str]:
    seed(db)
    with serve(create_app(db.backend(), token=TOKEN)) as url:
        yield url


def test_schemathesis_finds_no_server_error_on_any_generated_request(
    base_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    import requests

    schema = schemathesis.openapi.from_url(f"{base_url}/api/openapi.json", headers=AUTH)
    statuses: Counter[int] = Counter()
    by_operation: dict[str, Counter[int]] = {}
    skipped: list[str] = []
    started = time.monotonic()
    with requests.Session() as session:
        for result in schema.get_all_operations():
            operation = result.ok()
            for mode in (GenerationMode.POSITIVE, GenerationMode.NEGATIVE):

                @settings(
                    max_examples=EXAMPLES,
                    deadline=None,
                    database=None,
                    derandomize=True,
                    suppress_health_check=list(HealthCheck),
                )
                @given(case=operation.as_strategy(generation_mode=mode))
                def run(case: Any) -> None:
                    response = case.call(base_url=f"{base_url}/api", session=session, headers=AUTH)
                    statuses[response.status_code] += 1
                    by_operation.setdefault(case.operation.label, Counter())[
                        response.status_code
                    ] += 1
                    case.validate_response(response, checks=[not_a_server_error])

                try:
                    run()
                except Unsatisfiable:
                    # No input breaks the document of an operation without parameters.
                    assert mode is GenerationMode.NEGATIVE
                    skipped.append(operation.label)
    elapsed = time.monotonic() - started
    served = sum(statuses.values())
    errors = sum(n for status, n in statuses.items() if status >= 500)
    with capsys.disabled():
        print(
            f"\nschemathesis: {served} requests in {elapsed:.1f} s, "
            f"{errors} server errors, by status {dict(sorted(statuses.items()))}; "
            f"no invalid input for {len(skipped)} operations without parameters"
        )
        for label, counts in sorted(by_operation.items()):
            print(f"  {label}: {dict(sorted(counts.items()))}")
    assert served >= 300
    assert errors == 0
    assert statuses[200] > 0
