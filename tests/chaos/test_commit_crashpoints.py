"""A process killed at ``before_commit:<op>`` leaves the write uncommitted; at
``after_commit:<op>`` it leaves it committed: on every backend and every way a
write reaches the database (sync, async, PostgreSQL's ``complete_in``).
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from cairnq import kernel
from cairnq.models import Lease

from .._db import Database, admin_connect

pytestmark = [pytest.mark.chaos, pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[2]

# argv: database spec, task id, attempt, lease token, worker id, runner. Completes the attempt;
# the armed crash point ends the process with 137 before it can print.
COMPLETE = """
import asyncio, json, sys
from cairnq import kernel
from cairnq.models import Lease
from tests.chaos.programs import open_backend

spec, task_id, attempt, token, worker_id, runner = json.loads(sys.argv[1]), *sys.argv[2:]
lease = Lease(task_id, int(attempt), int(token))
backend = open_backend(spec, listen=False)
if runner == "sync":
    backend.run(kernel.complete(lease, worker_id, '{"done": 1}'), write=True)
else:
    async def main():
        if runner == "async":
            await backend.arun(kernel.complete(lease, worker_id, '{"done": 1}'), write=True)
        else:
            async def write(conn):
                await conn.execute("insert into effects values (%s)", (task_id,))
                return {"done": 1}

            await backend.aopen()
            await backend.arun_around_write(
                kernel.hold(lease, worker_id),
                write,
                lambda value: kernel.complete_held(lease, worker_id, json.dumps(value)),
            )

    asyncio.run(main())
print("survived", flush=True)
"""


def _claimed(db: Database) -> Lease:
    """Submit one task and claim it as worker ``w1``; the claim's lease."""
    with db.sync_client() as client:
        task = client.submit("job", {})
    rows = db.backend().run(
        kernel.claim(["default"], "w1", 60_000, [kernel.Draw(None, 1)], 100), write=True
    )
    assert [row["id"] for row in rows] == [task.id]
    return Lease.of(rows[0])


def _complete_and_die(db: Database, point: str, lease: Lease, runner: str) -> None:
    done = subprocess.run(
        [
            *(sys.executable, "-c", COMPLETE, db.spec(), lease.id),
            *(str(lease.attempt), str(lease.token), "w1", runner),
        ],
        cwd=ROOT,
        env={**os.environ, "CAIRNQ_CRASHPOINT": point},
        capture_output=True,
        timeout=60,
    )
    assert done.returncode == 137, done.stdout + done.stderr


@pytest.mark.parametrize("runner", ["sync", "async"])
@pytest.mark.parametrize(
    ("phase", "status"), [("before_commit", "running"), ("after_commit", "succeeded")]
)
def test_dying_around_the_commit_of_a_completion_leaves_it_uncommitted_before_and_committed_after(
    db: Database, runner: str, phase: str, status: str
) -> None:
    lease = _claimed(db)
    task_id = lease.id
    _complete_and_die(db, f"{phase}:complete", lease, runner)
    with db.sync_client() as client:
        assert client.get(task_id).status == status  # type: ignore[union-attr]


@pytest.mark.postgres
@pytest.mark.parametrize(("phase", "committed"), [("before_commit", False), ("after_commit", True)])
def test_dying_around_the_commit_of_complete_in_leaves_write_and_completion_together(
    pg_db: Database, phase: str, committed: bool
) -> None:
    with admin_connect(pg_db.url) as conn:
        conn.execute(f'create schema if not exists "{pg_db.schema}"')
        conn.execute(f'create table "{pg_db.schema}".effects (task_id text primary key)')
    lease = _claimed(pg_db)
    task_id = lease.id
    _complete_and_die(pg_db, f"{phase}:complete_held", lease, "complete_in")
    with admin_connect(pg_db.url) as conn:
        effects = conn.execute(f'select task_id from "{pg_db.schema}".effects').fetchall()
    with pg_db.sync_client() as client:
        status = client.get(task_id).status  # type: ignore[union-attr]
    assert (effects, status) == (([(task_id,)], "succeeded") if committed else ([], "running"))
