"""The blocking client has every operation of the async one, with the same parameters."""

from __future__ import annotations

import inspect
import threading
import time

import pytest

from cairnq import CairnQ, InvalidArgument, Retention, SyncCairnQ
from cairnq.testing import FakeClock

from ._db import Database
from ._statements import sent_statements, silent_refusal

HOUR = 3_600_000


def _public(cls: type) -> set[str]:
    return {name for name in dir(cls) if not name.startswith("_") and callable(getattr(cls, name))}


def test_both_clients_have_the_same_public_operations() -> None:
    assert _public(CairnQ) == _public(SyncCairnQ)


@pytest.mark.parametrize("name", sorted(_public(CairnQ) | {"__init__"}))
def test_each_operation_has_the_same_parameters_on_both_clients(name: str) -> None:
    async_signature = inspect.signature(getattr(CairnQ, name))
    sync_signature = inspect.signature(getattr(SyncCairnQ, name))
    assert [
        (p.name, p.kind, p.default, p.annotation) for p in sync_signature.parameters.values()
    ] == [(p.name, p.kind, p.default, p.annotation) for p in async_signature.parameters.values()]
    async_returns = str(async_signature.return_annotation).replace("AsyncIterator[", "Iterator[")
    assert str(sync_signature.return_annotation) == async_returns


def test_sync_watch_yields_queued_done_and_timer_signals(db: Database) -> None:
    with db.sync_client() as cq:
        signals = cq.watch(["default"], poll_ms=50)
        first = next(signals)
        task = cq.submit("job", {})
        second = next(signals)
        cq.cancel(task.id)
        third = next(signals)
        signals.close()
    assert first.kind == "poll"
    assert (second.kind, second.value) == ("queued", "default")
    assert (third.kind, third.value) == ("done", task.id)


def test_sync_sweep_deletes_the_finished_tasks_past_the_cutoff_now(db: Database) -> None:
    clock = FakeClock()
    with db.sync_client(clock=clock) as setup:
        old = setup.submit("job", {})
        setup.cancel(old.id)
        clock.advance(HOUR)
        fresh = setup.submit("job", {})
        setup.cancel(fresh.id)
    cq = SyncCairnQ(db.backend(clock=clock), retention=Retention(HOUR // 2))
    with cq:
        deleted = cq.sweep()
        gone = cq.get(old.id)
        kept = cq.get(fresh.id)
    cq.backend.close()
    assert deleted == 1
    assert gone is None
    assert kept is not None and kept.status == "canceled"


def test_a_sync_client_with_retention_sweeps_in_the_background(db: Database) -> None:
    clock = FakeClock()
    with db.sync_client(clock=clock) as setup:
        old = setup.submit("job", {})
        setup.cancel(old.id)
        clock.advance(10)
        fresh = setup.submit("job", {})
        setup.cancel(fresh.id)
    cq = SyncCairnQ(db.backend(clock=clock), retention=Retention(5, interval_ms=20))
    with cq:
        for _ in range(500):
            if cq.get(old.id) is None:
                break
            time.sleep(0.01)
        gone = cq.get(old.id)
        kept = cq.get(fresh.id)
    cq.backend.close()
    assert gone is None
    assert kept is not None and kept.status == "canceled"


def test_closing_a_sync_client_stops_its_background_sweeper(db: Database) -> None:
    cq = SyncCairnQ(db.backend(), retention=Retention(HOUR, interval_ms=HOUR))
    with cq:
        running = cq.sweeper is not None and cq.sweeper.running
    stopped = cq.sweeper is not None and not cq.sweeper.running
    cq.backend.close()
    assert running
    assert stopped


@silent_refusal
def test_sync_sweep_without_a_policy_is_an_error(db: Database) -> None:
    with db.sync_client() as cq:
        with (
            sent_statements(db) as sent,
            pytest.raises(InvalidArgument, match="no retention policy"),
        ):
            cq.sweep()
        assert sent == []


def test_opening_a_sync_client_from_many_threads_starts_one_sweeper(db: Database) -> None:
    cq = SyncCairnQ(db.backend(), retention=Retention(5, interval_ms=60_000))
    barrier = threading.Barrier(8)

    def open_it() -> None:
        barrier.wait()
        cq.open()

    threads = [threading.Thread(target=open_it) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    sweepers = [t for t in threading.enumerate() if t.name == "cairnq-retention"]
    cq.close()
    cq.backend.close()
    left = [t for t in threading.enumerate() if t.name == "cairnq-retention"]
    assert (len(sweepers), left) == (1, [])
