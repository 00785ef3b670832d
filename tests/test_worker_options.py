"""A worker's extensions take their options, checked when each is built, and read them in
each run.

``Limits([...])``, ``Snoozing(max_snoozes=...)``, ``History(record=...)`` and
``Schedules(evaluate=...)``, given to ``Worker(extensions=[...])``, replace the
built-in defaults; ``@worker.task(max_snoozes=...)`` is a task option
(``Extension.options``, ``Extension.task_options``). An extension outside cairnq
declares its own the same way and reads their checked values in
``WorkerView.options``. A bad value is the option's own error when the extension is
built (or the handler registered), before anything is written; a keyword no
extension takes is a ``TypeError``. The worker's module names no feature. The old
keywords of ``Worker(...)``: ``tests/test_deprecated_surface.py``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

import cairnq.extensions
import cairnq.worker
from cairnq import InvalidArgument, InvalidExtension, Limit, Worker
from cairnq.extensions import Extension, Hooks, Limits, Option, Schedules, Snoozing, WorkerView

from ._db import Database
from .test_kernel_names import mentions

WORKER_PACKAGE = Path(cairnq.worker.__file__).parent


def check_level(value: Any) -> int:
    if value not in (1, 2, 3):
        raise InvalidArgument(f"level must be 1, 2 or 3; got {value!r}")
    return int(value)


class Leveled(Extension):
    """Takes ``Leveled(level=...)`` and notes the value each run's hooks are given."""

    name = "leveled"
    options = {"level": Option(1, check_level)}  # noqa: RUF012

    def __init__(self, **settings: object) -> None:
        super().__init__(**settings)
        self.seen: list[object] = []

    def hooks(self, worker: WorkerView) -> Hooks:
        self.seen.append(worker.options["level"])
        return Hooks()


@pytest.mark.parametrize(
    "module", ["_worker.py", "_registering.py", "_run.py", "_starting.py", "_lifecycle.py"]
)
def test_the_worker_modules_name_no_feature(module: str) -> None:
    assert mentions((WORKER_PACKAGE / module).read_text()) == {}


def test_the_feature_scan_finds_a_worker_keyword_named_in_code() -> None:
    source = "def __init__(self, *, max_snoozes: int = 20, record_attempts=True): ...\n"
    assert set(mentions(source)) == {"snooze", "history"}


async def test_a_bad_limits_option_refuses_the_extension_and_stores_nothing(db: Database) -> None:
    async with db.client() as cq:
        with pytest.raises(InvalidArgument, match="a list of Limit values"):
            Worker(cq, extensions=[Limits(Limit.concurrency(1, name="job"))])  # type: ignore[arg-type]
        assert await cq.limits.list() == []


def test_a_bad_max_snoozes_option_refuses_the_extension() -> None:
    with pytest.raises(InvalidArgument, match="max_snoozes"):
        Snoozing(max_snoozes=-1)


def test_a_keyword_no_extension_takes_is_a_type_error(db: Database) -> None:
    with pytest.raises(TypeError, match="unexpected keyword argument 'max_snooze'"):
        db.worker(max_snooze=3)


def test_an_extension_keyword_it_declares_no_option_for_is_a_type_error() -> None:
    with pytest.raises(TypeError, match=r"Leveled\(\) got an unexpected keyword argument 'depth'"):
        Leveled(depth=3)


def test_a_bad_task_option_registers_nothing(db: Database) -> None:
    worker = db.worker()
    with pytest.raises(InvalidArgument, match="max_snoozes"):

        @worker.task(max_snoozes=-1)
        async def job(ctx: Any) -> None:
            return None

    assert worker.registry.names() == []


def test_a_task_keyword_no_extension_takes_is_a_type_error(db: Database) -> None:
    worker = db.worker()
    with pytest.raises(TypeError, match="unexpected keyword argument 'retries'"):
        worker.register("job", lambda ctx: None, retries=3)  # type: ignore[call-arg]
    assert worker.registry.names() == []


async def test_an_extension_reads_its_option_checked_in_each_run(db: Database) -> None:
    leveled = Leveled(level=2)
    worker = db.worker(poll_interval_ms=20, extensions=[leveled])
    await worker.run(until_idle=True)
    await worker.close()
    assert leveled.seen == [2]


def test_an_extension_option_not_given_takes_its_default(db: Database) -> None:
    leveled = Leveled()
    worker = db.worker(extensions=[leveled])
    assert worker._options["level"] == 1


def test_a_bad_extension_option_is_its_check_s_error() -> None:
    with pytest.raises(InvalidArgument, match="level must be 1, 2 or 3"):
        Leveled(level=5)


async def test_an_extension_given_to_the_client_brings_its_options_to_the_worker(
    db: Database,
) -> None:
    async with db.client(extensions=[Snoozing(max_snoozes=4)]) as cq:
        worker = Worker(cq)
        assert worker._options["max_snoozes"] == 4


def test_a_built_in_given_to_the_worker_takes_the_default_s_place(db: Database) -> None:
    snoozing = Snoozing(max_snoozes=7)
    worker = db.worker(extensions=[snoozing])
    names = [e.name for e in worker._extensions]
    assert names == [e.name for e in cairnq.extensions.builtins()]
    assert snoozing in worker._extensions
    assert worker._options["max_snoozes"] == 7


def test_two_extensions_taking_one_option_are_refused(db: Database) -> None:
    class Shadow(Leveled):
        name = "shadow"

    with pytest.raises(InvalidExtension, match="worker option level is leveled's"):
        db.worker(extensions=[Leveled(), Shadow()])


def test_an_extension_cannot_take_a_built_in_s_option(db: Database) -> None:
    class Snoozy(Leveled):
        name = "snoozy"
        options = {"max_snoozes": Option(3, int)}  # noqa: RUF012

    with pytest.raises(InvalidExtension, match="worker option max_snoozes is snooze's"):
        db.worker(extensions=[Snoozy()])


def test_the_old_option_attributes_read_the_checked_options(db: Database) -> None:
    limit = Limit.concurrency(1, name="job")
    worker = db.worker(extensions=[Limits([limit]), Schedules(evaluate=False)])
    assert worker.limits == [limit]
    assert worker.evaluates_schedules is False
