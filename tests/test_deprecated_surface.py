"""The old spellings kept for one release: each still works, and warns once
(``CairnQDeprecationWarning``) naming what replaces it.

The client's flat methods of limits, pauses, the workflows' reads, snooze,
steps, attempts and presence (``cq.set_limit(...)`` for ``cq.limits.set(...)``, ...), on both
clients; ``cq.history`` for ``cq.attempts``; and ``Worker(...)``'s feature keywords
(``limits=``, ``max_snoozes=``, ``record_attempts=``, ``schedules=``, and an outside
extension's) for the extension given with its option.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pytest

from cairnq import InvalidArgument, Limit
from cairnq._deprecated import CairnQDeprecationWarning, forget_warnings
from cairnq.extensions import Extension, Hooks, Option, WorkerView

from ._db import Database


@dataclass(frozen=True)
class Seeded:
    """What each alias test finds on the database: limit ``q-1``, queue ``q`` and task
    name ``t.x`` paused, and a graph where ``b`` runs after ``a``."""

    a: str
    b: str


def _seed(cq: Any) -> Any:
    """Seed ``cq`` (either client); returns a ``Seeded``, or a coroutine of one."""
    limit = Limit.concurrency(1, queue="q", id="q-1")

    def seeded(graph: dict[str, Any]) -> Seeded:
        return Seeded(graph["a"].id, graph["b"].id)

    graph = {"a": {"task": "a"}, "b": {"task": "b", "after": ["a"]}}
    if inspect.iscoroutinefunction(cq.submit):

        async def seed() -> Seeded:
            await cq.limits.set(limit)
            await cq.pauses.pause_queue("q")
            await cq.pauses.pause_task("t.x")
            return seeded(await cq.submit_graph(graph))

        return seed()
    cq.limits.set(limit)
    cq.pauses.pause_queue("q")
    cq.pauses.pause_task("t.x")
    return seeded(cq.submit_graph(graph))


# Each alias: how to call it on a seeded client, and what its result must be.
Alias = tuple[Callable[[Any, Seeded], Any], Callable[[Any, Seeded], bool]]
ALIASES: dict[str, Alias] = {
    "cq.set_limit(...)": (
        lambda cq, s: cq.set_limit(Limit.concurrency(2, queue="r", id="r-2")),
        lambda got, s: got.id == "r-2",
    ),
    "cq.list_limits()": (
        lambda cq, s: cq.list_limits(),
        lambda got, s: [x.id for x in got] == ["q-1"],
    ),
    "cq.remove_limit(...)": (lambda cq, s: cq.remove_limit("q-1"), lambda got, s: got is True),
    "cq.limit_usage()": (
        lambda cq, s: cq.limit_usage(),
        lambda got, s: [u.limit.id for u in got] == ["q-1"],
    ),
    "cq.pause_queue(...)": (lambda cq, s: cq.pause_queue("r"), lambda got, s: got.target == "r"),
    "cq.resume_queue(...)": (lambda cq, s: cq.resume_queue("q"), lambda got, s: got.target == "q"),
    "cq.pause_task(...)": (lambda cq, s: cq.pause_task("t.y"), lambda got, s: got.target == "t.y"),
    "cq.resume_task(...)": (
        lambda cq, s: cq.resume_task("t.x"),
        lambda got, s: got.target == "t.x",
    ),
    "cq.paused()": (
        lambda cq, s: cq.paused(),
        lambda got, s: [p.target for p in got] == ["q", "t.x"],
    ),
    "cq.dependencies(...)": (
        lambda cq, s: cq.dependencies(s.b),
        lambda got, s: [d.task.id for d in got] == [s.a],
    ),
    "cq.workflow(...)": (
        lambda cq, s: cq.workflow(s.b),
        lambda got, s: set(got.tasks) == {s.a, s.b},
    ),
    "cq.snoozes(...)": (lambda cq, s: cq.snoozes(s.a), lambda got, s: got is None),
    "cq.attempts(task_id)": (lambda cq, s: cq.attempts(s.a), lambda got, s: got == []),
    "cq.steps(task_id)": (lambda cq, s: cq.steps(s.a), lambda got, s: got == []),
    "cq.history": (lambda cq, s: cq.history.list(s.a), lambda got, s: got == []),
    "cq.workers()": (lambda cq, s: cq.workers(), lambda got, s: got == []),
    "cq.unserved()": (
        lambda cq, s: cq.unserved(queue="default"),
        lambda got, s: [(u.queue, u.name, u.count) for u in got] == [("default", "a", 1)],
    ),
}


@pytest.mark.parametrize("old", list(ALIASES))
async def test_a_flat_client_method_still_works_and_warns_once(db: Database, old: str) -> None:
    call, check = ALIASES[old]
    async with db.client() as cq:
        seeded = await _seed(cq)
        forget_warnings()
        with pytest.warns(CairnQDeprecationWarning, match=rf"{_pattern(old)} is deprecated"):
            got = await call(cq, seeded)
        assert check(got, seeded)


@pytest.mark.parametrize("old", list(ALIASES))
def test_a_flat_blocking_client_method_still_works_and_warns_once(db: Database, old: str) -> None:
    call, check = ALIASES[old]
    with db.sync_client() as cq:
        seeded = _seed(cq)
        forget_warnings()
        with pytest.warns(CairnQDeprecationWarning, match=rf"{_pattern(old)} is deprecated"):
            got = call(cq, seeded)
        assert check(got, seeded)


def _pattern(old: str) -> str:
    return old.replace("(", r"\(").replace(")", r"\)").replace(".", r"\.")


async def test_an_old_spelling_warns_once_per_process(db: Database) -> None:
    async with db.client() as cq:
        forget_warnings()
        with pytest.warns(CairnQDeprecationWarning):
            await cq.paused()
        assert await cq.paused() == []  # a second warning would fail: warnings are errors


def _check_level(value: Any) -> int:
    if value not in (1, 2, 3):
        raise InvalidArgument(f"level must be 1, 2 or 3; got {value!r}")
    return int(value)


class Leveled(Extension):
    """An extension outside cairnq with one worker option, ``level``."""

    name = "leveled"
    options = {"level": Option(1, _check_level)}  # noqa: RUF012

    def hooks(self, worker: WorkerView) -> Hooks:
        return Hooks()


WORKER_KEYWORDS: dict[str, tuple[dict[str, Any], str, str, object]] = {
    "limits": (
        {"limits": [Limit.concurrency(1, name="job", id="job-1")]},
        r"Worker\(extensions=\[Limits\(\[\.\.\.\]\)\]\)",
        "limits",
        [Limit.concurrency(1, name="job", id="job-1")],
    ),
    "max_snoozes": (
        {"max_snoozes": 3},
        r"Worker\(extensions=\[Snoozing\(max_snoozes=\.\.\.\)\]\)",
        "max_snoozes",
        3,
    ),
    "record_attempts": (
        {"record_attempts": False},
        r"Worker\(extensions=\[History\(record=\.\.\.\)\]\)",
        "record_attempts",
        False,
    ),
    "schedules": (
        {"schedules": False},
        r"Worker\(extensions=\[Schedules\(evaluate=\.\.\.\)\]\)",
        "schedules",
        False,
    ),
    "level": (
        {"level": 2, "extensions": [Leveled()]},
        r"Worker\(extensions=\[Leveled\(level=\.\.\.\)\]\)",
        "level",
        2,
    ),
}


@pytest.mark.parametrize("keyword", list(WORKER_KEYWORDS))
def test_a_worker_feature_keyword_still_works_and_warns_once(db: Database, keyword: str) -> None:
    given, replacement, option, value = WORKER_KEYWORDS[keyword]
    forget_warnings()
    with pytest.warns(
        CairnQDeprecationWarning, match=rf"Worker\({keyword}=\.\.\.\).*{replacement}"
    ):
        worker = db.worker(**given)
    assert worker._options[option] == value


def test_a_worker_feature_keyword_wins_over_the_extension_s_own(db: Database) -> None:
    from cairnq.extensions import Snoozing

    forget_warnings()
    with pytest.warns(CairnQDeprecationWarning):
        worker = db.worker(extensions=[Snoozing(max_snoozes=9)], max_snoozes=2)
    assert worker._options["max_snoozes"] == 2


def test_a_worker_keyword_warning_points_at_the_application_line_through_worker_sqlite(
    tmp_path: Any,
) -> None:
    from cairnq import Worker

    forget_warnings()
    with pytest.warns(CairnQDeprecationWarning) as caught:
        worker = Worker.sqlite(tmp_path / "tasks.db", max_snoozes=3)
    assert worker is not None
    assert [w.filename for w in caught] == [__file__]


def test_a_flat_method_warning_points_at_the_application_line(db: Database) -> None:
    forget_warnings()
    with db.sync_client() as cq, pytest.warns(CairnQDeprecationWarning) as caught:
        cq.list_limits()
    assert [w.filename for w in caught] == [__file__]


def test_cairnq_deprecation_warning_is_importable_from_cairnq() -> None:
    import cairnq

    assert cairnq.CairnQDeprecationWarning is CairnQDeprecationWarning
    assert issubclass(CairnQDeprecationWarning, DeprecationWarning)
