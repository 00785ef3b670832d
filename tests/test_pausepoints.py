"""The ``before_write`` pause point freezes a process only while none of its write
transactions is open, so a frozen process holds no lock another needs."""

from __future__ import annotations

import asyncio

import pytest

from cairnq import _crashpoints


@pytest.fixture
def frozen(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The pause points that would have frozen this process (armed: ``before_write:x``)."""
    reached: list[str] = []
    monkeypatch.setattr(_crashpoints, "PAUSE_ARMED", "before_write:x")
    monkeypatch.setattr(_crashpoints, "_paused", False)
    monkeypatch.setattr(_crashpoints, "pausepoint", reached.append)
    return reached


async def test_the_pause_point_waits_for_an_open_write_transaction_to_end(
    frozen: list[str],
) -> None:
    _crashpoints.write_began()
    try:
        pausing = asyncio.ensure_future(_crashpoints.apausepoint_when_quiet("before_write:x"))
        for _ in range(20):
            await asyncio.sleep(0.001)
        assert not pausing.done() and frozen == []
    finally:
        _crashpoints.write_ended()
    await asyncio.wait_for(pausing, 10)
    assert frozen == ["before_write:x"]


async def test_a_pause_point_not_armed_returns_at_once_whatever_is_open(
    frozen: list[str],
) -> None:
    _crashpoints.write_began()
    try:
        await asyncio.wait_for(_crashpoints.apausepoint_when_quiet("before_write:y"), 10)
    finally:
        _crashpoints.write_ended()
    assert frozen == []


def test_the_blocking_pause_point_freezes_at_once_when_no_write_is_open(
    frozen: list[str],
) -> None:
    _crashpoints.pausepoint_when_quiet("before_write:x")
    assert frozen == ["before_write:x"]
