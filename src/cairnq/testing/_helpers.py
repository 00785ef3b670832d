"""Running a worker to idle, running tasks at submit, and asserting what was submitted."""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from ..models import Task
from ._clock import FakeClock

if TYPE_CHECKING:
    from ..client import CairnQ
    from ..worker import Worker

# Matches any payload in assert_enqueued / assert_not_enqueued.
_ANY: Any = object()
MAX_ROUNDS = 1000


async def drain(worker: Worker, *, clock: FakeClock | None = None) -> None:
    """Run everything of ``worker``'s queues that is due, until nothing is due or running.

    With ``clock`` (the ``FakeClock`` the backend reads), a task delayed into the
    future (``delay_ms``, a retry in backoff, a snooze) does not stop the drain:
    the clock moves to its start and the worker runs again, until no queued task
    of the worker's queues waits in the future. Tasks no handler of this worker
    serves stay queued.

    Args:
        worker: A worker that is not running.
        clock: Move this clock forward to delayed tasks (none: run what is due now).

    Raises:
        RuntimeError: the worker is already running, or the clock had to move more
            than 1000 times (a task that keeps rescheduling itself).

    Example::

        await cq.submit("email.send", {"to": "ada@example.com"}, delay_ms=60_000)
        await drain(worker, clock=clock)      # the clock moved a minute; it ran
    """
    for _ in range(MAX_ROUNDS):
        await worker.run(until_idle=True)
        if clock is None:
            return
        now = clock.now_ms()
        waiting = [
            t.run_at_ms for t in await _queued(worker.client, worker.queues) if t.run_at_ms > now
        ]
        if not waiting:
            return
        clock.set(min(waiting))
    raise RuntimeError(f"drain moved the clock {MAX_ROUNDS} times and tasks still wait")


async def _queued(client: CairnQ, queues: Iterable[str]) -> list[Task]:
    found: list[Task] = []
    for queue in queues:
        offset = 0
        while True:
            page = await client.list(status="queued", queue=queue, limit=500, offset=offset)
            found.extend(page)
            if len(page) < 500:
                break
            offset += 500
    return found


class Inline:
    """A client whose submit methods run the submitted tasks before returning.

    ``submit``, ``submit_many`` and ``submit_many_ids`` submit, then drain the worker.
    Everything else is the wrapped worker's client. Made by ``inline(worker)``.
    """

    def __init__(self, worker: Worker, clock: FakeClock | None = None) -> None:
        self.worker = worker
        self.client: CairnQ = worker.client
        self.clock = clock

    async def submit(self, *args: Any, **kwargs: Any) -> Task:
        """``CairnQ.submit``, then ``drain``; returns the task as it ended."""
        task: Task = await self.client.submit(*args, **kwargs)
        await drain(self.worker, clock=self.clock)
        ended = await self.client.get(task.id)
        return task if ended is None else ended

    async def submit_many(self, *args: Any, **kwargs: Any) -> list[Task]:
        """``CairnQ.submit_many``, then ``drain``; returns the tasks as they ended."""
        tasks = await self.client.submit_many(*args, **kwargs)
        await drain(self.worker, clock=self.clock)
        return [await self.client.get(task.id) or task for task in tasks]

    async def submit_many_ids(self, *args: Any, **kwargs: Any) -> list[str]:
        """``CairnQ.submit_many_ids``, then ``drain``; returns the ids."""
        ids: list[str] = await self.client.submit_many_ids(*args, **kwargs)
        await drain(self.worker, clock=self.clock)
        return ids

    def __getattr__(self, name: str) -> Any:
        return getattr(self.client, name)


def inline(worker: Worker, *, clock: FakeClock | None = None) -> Inline:
    """A stand-in for ``worker.client`` that runs each submitted task at once.

    Hand it to code under test in place of its ``CairnQ``: ``submit`` returns
    once the task (and whatever it submitted) has run on ``worker``, so a unit
    test checks the outcome right after the call.

    Example::

        cq = inline(worker)
        task = await cq.submit("resize", {"width": 640})
        assert task.status == "succeeded"
    """
    return Inline(worker, clock)


async def assert_enqueued(
    client: CairnQ | Inline,
    name: str,
    *,
    payload: Any = _ANY,
    queue: str | None = None,
) -> Task:
    """Check that a queued task named ``name`` exists (with this payload, on this queue).

    Args:
        client: The client the code under test used.
        name: The task name.
        payload: The payload it must have, compared whole (any when omitted).
        queue: The queue it must be on (any when omitted).

    Returns:
        The newest matching task.

    Raises:
        AssertionError: none matches; the message lists what is queued instead.

    Example::

        await signup(cq, "ada@example.com")
        await assert_enqueued(cq, "email.send", payload={"to": "ada@example.com"})
    """
    matches, queued = await _matching(client, name, payload, queue)
    if not matches:
        wanted = _describe(name, payload, queue)
        raise AssertionError(f"no queued task {wanted}; queued: {_summary(queued)}")
    return matches[0]


async def assert_not_enqueued(
    client: CairnQ | Inline,
    name: str,
    *,
    payload: Any = _ANY,
    queue: str | None = None,
) -> None:
    """Check that no queued task named ``name`` (with this payload, on this queue) exists.

    Raises:
        AssertionError: one does; the message shows it.

    Example::

        await assert_not_enqueued(cq, "email.send")
    """
    matches, _ = await _matching(client, name, payload, queue)
    if matches:
        wanted = _describe(name, payload, queue)
        raise AssertionError(f"expected no queued task {wanted}; found {_summary(matches)}")


async def _matching(
    client: CairnQ | Inline, name: str, payload: Any, queue: str | None
) -> tuple[list[Task], list[Task]]:
    real = client.client if isinstance(client, Inline) else client
    queued = list(await real.list(status="queued", queue=queue, limit=1000))
    matches = [t for t in queued if t.name == name and (payload is _ANY or t.payload == payload)]
    return matches, queued


def _describe(name: str, payload: Any, queue: str | None) -> str:
    text = repr(name)
    if payload is not _ANY:
        text += f" with payload {payload!r}"
    if queue is not None:
        text += f" on queue {queue!r}"
    return text


def _summary(tasks: list[Task]) -> str:
    if not tasks:
        return "none"
    shown = ", ".join(f"{t.name!r} on {t.queue!r} payload {t.payload!r}" for t in tasks[:10])
    return shown + (f" and {len(tasks) - 10} more" if len(tasks) > 10 else "")
